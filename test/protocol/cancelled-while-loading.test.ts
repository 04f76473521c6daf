import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../src/store/db/open.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { writeGguf } from "../fixtures/gguf-writer.ts";
import { copySecondModel } from "../fixtures/several-models.ts";
import { writeStack } from "../fixtures/stack.ts";
import { startHarness } from "../fixtures/stdio-harness.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A request cancelled in the read that brought it, while its method's module still loads, is
// handed to its handler with its signal already aborted (the handler's events come first): it
// must start nothing (docs/protocol.md#cancel). What the stand-ins record is read after the
// core has exited; `status`, read before that, shows a start begun and stopped before its spawn.

let dirs: ReturnType<typeof tmpdir>[] = [];
afterEach(() => {
  for (const d of dirs) d[Symbol.dispose]();
  dirs = [];
});

/** The stack, with a second chat model (`big`) and an embedding one (`vec`) as `models` entries. */
function stack() {
  const dir = tmpdir();
  dirs.push(dir);
  const argvLog = join(dir.path, "llama-argv.txt");
  writeGguf(dir.path, "vec.gguf", bertModel());
  const s = writeStack(dir.path, {
    knobs: { FAKE_LLAMA_ARGV_LOG: argvLog },
    extraYaml:
      "models:\n  - {name: big, path: ./second.gguf}\n  - {name: vec, path: ./vec.gguf, kind: embedding}\n",
  });
  copySecondModel(dir.path);
  return {
    ...s,
    launched: () => (existsSync(argvLog) ? readFileSync(argvLog, "utf8") : ""),
    databaseMade: () => existsSync(join(s.dataDir, DB_FILE)),
  };
}

/** Sends `request` and a cancel of it in one read to a fresh core; the messages once it exited. */
async function cancelledWhileLoading(dir: string, method: string, params: object) {
  const h = startHarness({ cwd: dir });
  // `cancel` loaded first, so it runs as it is read: the request's own module is still loading
  // (its load resolves in a later turn), whichever modules this process has imported already.
  expect((await h.request({ id: "c0", method: "cancel", params: { request_id: "none" } })).result).toEqual({
    cancelled: false,
  });
  h.sendRaw(
    `${JSON.stringify({ id: "r", method, params })}\n${JSON.stringify({ id: "c", method: "cancel", params: { request_id: "r" } })}\n`,
  );
  await h.waitFor((ms) => ms.some((m) => m.id === "r" && m.type !== "event"), 20_000);
  // A start begun is seen here even when the shutdown below stops it before its spawn.
  const status = (await h.request({ id: "st", method: "status" }, 20_000)).result;
  expect(
    status.models.map((m: { state: string }) => m.state).filter((s: string) => s !== "unloaded"),
  ).toEqual([]);
  expect(status.llama.state).toBe("stopped");
  // Not even asked for: a load begun and dropped at once leaves its model marked used.
  expect(
    status.models
      .filter((m: { last_used_at: string | null }) => m.last_used_at !== null)
      .map((m: { name: string }) => m.name),
  ).toEqual([]);
  await h.request({ id: "s", method: "shutdown" }, 20_000);
  expect(await h.exit).toBe(0);
  expect(h.terminal("c")?.result).toEqual({ cancelled: true });
  expect(h.terminal("r")).toMatchObject({ type: "error", code: "cancelled" });
  return h.messages.filter((m) => m.id === "r");
}

describe("a request cancelled while its method loads starts nothing", () => {
  test("chat: no llama-server, no MCP server, no database", async () => {
    const s = stack();
    const own = await cancelledWhileLoading(s.dir, "chat", { input: "hi", user_id: "u" });
    // Cancelled before its turn began (no run_start): no turn events, as a loaded chat cancelled in line.
    expect(own.map((m) => m.event ?? m.type)).toEqual(["error"]);
    expect(s.launched()).toBe("");
    expect(s.mcpPids()).toEqual([]);
    expect(s.databaseMade()).toBe(false);
  });

  test("warmup: no llama-server, no database", async () => {
    const s = stack();
    const own = await cancelledWhileLoading(s.dir, "warmup", {});
    expect(own.map((m) => m.event ?? m.type)).toEqual(["error"]);
    expect(s.launched()).toBe("");
    expect(s.databaseMade()).toBe(false);
  });

  test("documents.add: no database, no rows", async () => {
    const s = stack();
    const own = await cancelledWhileLoading(s.dir, "documents.add", {
      user_id: "u",
      text: "some words",
      name: "n",
    });
    expect(own.map((m) => m.event ?? m.type)).toEqual(["error"]);
    expect(s.databaseMade()).toBe(false);
    expect(s.launched()).toBe("");
  });

  test("models.load: no llama-server", async () => {
    const s = stack();
    const own = await cancelledWhileLoading(s.dir, "models.load", { model: "big" });
    expect(own.map((m) => m.event ?? m.type)).toEqual(["error"]);
    expect(s.launched()).toBe("");
  });

  test("embed: no llama-server", async () => {
    const s = stack();
    const own = await cancelledWhileLoading(s.dir, "embed", { input: "hello", model: "vec" });
    expect(own.map((m) => m.event ?? m.type)).toEqual(["error"]);
    expect(s.launched()).toBe("");
  });
});
