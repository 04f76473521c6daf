import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import type { Services } from "../../src/methods/services.ts";
import { sessionsDelete } from "../../src/methods/sessions.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { ChatHarness, type Msg } from "../agent/harness.ts";
import { canMakeImmutable, makeImmutable, undoImmutable } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// An erase never answers ok while a saved KV state of it stays on disk (docs/protocol.md,
// `users.delete`; docs/agent.md#prompt-reuse). Seen through the compiled core with data_dir/kv
// not writable: sessions.delete answered `deleted: true`, the session's tokens stayed readable in
// kv/, and a delete sent again was refused (session_not_found) without trying again. An
// immutable file (chattr +i) cannot be removed even by root; where chattr cannot set it the test
// says so and is skipped.
const canChattr = canMakeImmutable("sessions-kv-erase");
// Here, not only in the test's finally: a test that timed out never reaches its finally.
afterEach(undoImmutable);

describe("a delete whose saved KV state cannot be removed", () => {
  test.skipIf(!canChattr)("fails naming the file; sent again once it can be, it removes it", async () => {
    await using h = new ChatHarness({ agents: [{ name: "plain" }], memory: { enabled: false } });
    h.llama.script({ content: ["ok"] });
    await h.chat("1", { input: "hello", session_id: "s" });
    const kv = join(h.dataDir, "kv");
    mkdirSync(kv, { recursive: true });
    const bin = join(kv, `${new KvDisk(kv, 1).nameOf("default_user", "s")}.bin`);
    writeFileSync(bin, "the session's saved tokens");
    const call = async (id: string, method: string, params: Record<string, unknown>) => {
      h.send(id, method, params);
      return (await h.terminal(id)) as Msg & { code?: string; data?: Record<string, unknown> };
    };
    expect(makeImmutable(bin)).toBe(true);
    let first: Msg & { code?: string; data?: Record<string, unknown> };
    try {
      first = await call("2", "sessions.delete", { session_id: "s" });
    } finally {
      undoImmutable();
    }
    expect(first).toMatchObject({ type: "error", code: "internal_error", data: { file: bin } });
    expect(existsSync(bin)).toBe(true);
    const again = await call("3", "sessions.delete", { session_id: "s" });
    expect(again).toMatchObject({ type: "error", data: { reason: "session_not_found" } });
    expect(existsSync(bin)).toBe(false);
  });

  // A file of another session stuck meanwhile is not this erase's to report (docs/agent.md#prompt-reuse).
  test.skipIf(!canChattr)("names only the erase's own files", () => {
    using dir = tmpdir();
    const kv = new KvDisk(dir.path, 1 << 30);
    const fileOf = (session: string) => join(dir.path, `${kv.nameOf("u", session)}.bin`);
    for (const s of ["a", "b"]) writeFileSync(fileOf(s), `tokens of ${s}`);
    expect(makeImmutable(fileOf("a"), fileOf("b"))).toBe(true);
    try {
      expect(kv.unremovedBy(() => kv.removeSession("u", "a"))).toEqual([fileOf("a")]);
      expect(kv.unremovedBy(() => kv.removeSession("u", "b"))).toEqual([fileOf("b")]);
      expect(kv.unremovedBy(() => {})).toEqual([]);
    } finally {
      undoImmutable();
    }
    expect(kv.unremovedBy(() => kv.removeSession("u", "a"))).toEqual([]);
    expect(existsSync(fileOf("a"))).toBe(false);
  });

  // A save asked before the erase, its file not yet made (its task queued in llama-server), has it
  // taken once the save is over (kv-disk.ts `erase`): a removal that fails then left the delete
  // answering ok over the erased tokens, the file named nowhere.
  test.skipIf(!canChattr)(
    "names a save's file that could not be removed once the save was over",
    async () => {
      using dir = tmpdir();
      const kv = new KvDisk(dir.path, 1 << 30);
      const temp = join(dir.path, kv.tempName(kv.nameOf("u", "a")));
      kv.zeroes.begin(temp); // the save asked (save-slot.ts), its task not yet run
      const left = kv.unremovedBy(() => kv.removeSession("u", "a"));
      writeFileSync(temp, "tokens of a"); // the task runs after the erase looked
      expect(makeImmutable(temp)).toBe(true);
      try {
        kv.zeroes.settled(temp);
        await kv.zeroes.done(); // as kv-erased.ts waits before it looks at what is left
        expect(left).toEqual([temp]);
      } finally {
        undoImmutable();
      }
    },
  );

  // Only a session the store says is not there has its KV state tried again: a store that cannot
  // answer (locked, its folder gone) says nothing of the session, whose saved state stays.
  test("a store failure on the delete leaves the KV state alone", async () => {
    const forgotten: string[] = [];
    const failing = new CoreError("internal_error", "the database is locked", { key: "app.data_dir" });
    const services = {
      storeReady: async () => {},
      store: () => ({
        whenImported: async () => {},
        mustFind: () => {
          throw failing;
        },
      }),
      forgetKv: (user: string, session?: string) => {
        forgotten.push(`${user}/${session}`);
        return [];
      },
    } as unknown as Services;
    let thrown: unknown;
    try {
      await sessionsDelete.run({ user_id: "u", session_id: "s" } as never, {} as never, services);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBe(failing);
    expect(forgotten).toEqual([]);
  });
});
