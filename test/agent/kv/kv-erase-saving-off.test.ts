import { expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Zeroes } from "../../../src/agent/kv/drop-file.ts";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { entryOf } from "../../../src/agent/kv/kv-entry.ts";
import type { PromptReuse } from "../../../src/agent/kv/reuse.ts";
import { KvErase } from "../../../src/server/kv-erase.ts";
import { ChatHarness, type Msg } from "../harness.ts";

// Saving turned off (`llama.kv_disk_bytes: 0`) after a run that saved: no prompt reuse looks
// after data_dir/kv any more, yet an erase takes what it holds of the erased session or user
// (server/kv-erase.ts; docs/agent.md#prompt-reuse). Found by a hostile review: the deletes
// answered ok and left the session's tokens and notes on disk.

/** A committed state and its sidecar, as a run with saving on leaves them; their paths. */
async function savedByAnEarlierRun(dataDir: string, user: string, session: string): Promise<string[]> {
  const dir = join(dataDir, "kv");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const disk = new KvDisk(dir, 2 ** 30);
  const name = disk.nameOf(user, session);
  const temp = disk.tempName(name);
  writeFileSync(join(dir, temp), "the tokens of PRIVATE-WORDS");
  const record = { cut: 0, notes: [{ seq: 0, text: "a note of PRIVATE-WORDS", ids: [], sources: [] }] };
  const stats = { n_saved: 5, n_written: 27 };
  expect(
    await disk.commit(
      temp,
      entryOf({ userId: user, sessionId: session }, "fp", stats, record, [], Date.now()),
    ),
  ).toBe(true);
  return [join(dir, `${name}.bin`), join(dir, `${name}.json`)];
}

/** A core with saving off whose session `s` has had a turn. */
async function savingOff(): Promise<ChatHarness> {
  const h = new ChatHarness({
    agents: [{ name: "plain" }],
    memory: { enabled: false },
    llama: { kv_disk_bytes: 0 },
  });
  h.llama.script({ content: ["ok"] });
  await h.chat("1", { input: "hello", session_id: "s" });
  return h;
}

for (const method of ["sessions.delete", "users.delete"] as const) {
  test(`${method} with saving off takes the state an earlier run saved; another session's stays`, async () => {
    await using h = await savingOff();
    const erased = await savedByAnEarlierRun(h.dataDir, "default_user", "s");
    const kept = await savedByAnEarlierRun(h.dataDir, "other_user", "t");
    h.send("2", method, method === "sessions.delete" ? { session_id: "s" } : { user_id: "default_user" });
    expect(((await h.terminal("2")) as Msg).type).toBe("result");
    expect(erased.filter((f) => existsSync(f))).toEqual([]);
    expect(kept.filter((f) => existsSync(f))).toEqual(kept);
  });
}

test("with saving off and no KV folder at all, an erase answers and makes none", async () => {
  await using h = await savingOff();
  h.send("2", "sessions.delete", { session_id: "s" });
  expect(((await h.terminal("2")) as Msg).type).toBe("result");
  expect(readdirSync(h.dataDir)).not.toContain("kv");
});

test("with saving off, a KV folder made after the first erase (another core's) is erased by the next", async () => {
  await using h = await savingOff();
  h.send("2", "sessions.delete", { session_id: "s" });
  expect(((await h.terminal("2")) as Msg).type).toBe("result");
  await h.chat("3", { input: "again", session_id: "s" });
  const files = await savedByAnEarlierRun(h.dataDir, "default_user", "s");
  h.send("4", "sessions.delete", { session_id: "s" });
  expect(((await h.terminal("4")) as Msg).type).toBe("result");
  expect(files.filter((f) => existsSync(f))).toEqual([]);
});

test("with saving on, the prompt reuse's erase is the folder's only pass", () => {
  const passes: string[] = [];
  const disk = {
    removeSession: () => passes.push("folder"),
    zeroes: new Zeroes(),
    unremovedBy: (erase: () => void) => {
      erase();
      return [];
    },
  } as unknown as KvDisk;
  const reuse = { forget: () => passes.push("reuse") } as unknown as PromptReuse;
  const erase = new KvErase({
    dir: () => "/nowhere",
    budgeted: () => disk,
    made: () => disk,
    reuse: () => reuse,
    several: () => undefined,
  });
  expect(erase.forget("u", "s")).toEqual([]);
  expect(passes).toEqual(["reuse"]);
  // No reuse made yet: the folder's own pass.
  const early = new KvErase({
    dir: () => "/nowhere",
    budgeted: () => disk,
    made: () => disk,
    reuse: () => undefined,
    several: () => undefined,
  });
  early.forget("u", "s");
  expect(passes).toEqual(["reuse", "folder"]);
});
