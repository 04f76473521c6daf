import { describe, expect, test } from "bun:test";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { expectGoneAfterCoreKill, llamaChildren } from "./core-kill.ts";

// Issue 19 items 1 and 3 from the compiled binary, against the stand-in taught transcripts/90
// (test/fixtures/llama-server/transcripts/90-child-mode-supervision.txt): a SIGKILL of the core
// leaves no llama-server, idle, streaming or loading (docs/supervisor.md#child-mode); a chat right
// after llama-server was killed restarts it and is served.

const STAND_IN = "llama-stand-in/main.ts";

describe.skipIf(process.platform === "win32")("llama-server as the compiled core's child", () => {
  test("SIGKILL of the core while llama-server is idle: it is gone within 1 s (90: stdin EOF after ready)", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path);
    const core = spawnCore({ cwd: dir.path, env: stack.env });
    expect((await core.request({ id: "w", method: "warmup" }, 20_000)).type).toBe("result");
    await expectGoneAfterCoreKill(core, STAND_IN, 1000, "stand-in, idle: core SIGKILL → gone");
  }, 30_000);

  test("SIGKILL of the core while a reply streams: gone within 1 s (90: stdin EOF after ready)", async () => {
    await using dir = tmpdir();
    const words = Array.from({ length: 200 }, (_, i) => `w${i}`).join(" ");
    const stack = writeStack(dir.path, { script: [{ content: words, chunk_delay_ms: 50 }] });
    const core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "c", method: "chat", params: { input: "talk" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "c" && m.event === "llm_chunk"), 20_000);
    await expectGoneAfterCoreKill(core, STAND_IN, 1000, "stand-in, streaming: core SIGKILL → gone");
  }, 30_000);

  test("SIGKILL of the core while the model loads: gone within its load time + 1 s, once the load ends (90: stdin EOF while still loading)", async () => {
    await using dir = tmpdir();
    const loadMs = 1500;
    const stack = writeStack(dir.path, { knobs: { FAKE_LLAMA_LOAD_MS: String(loadMs) } });
    const core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "w", method: "warmup" });
    await core.waitFor((ms) => ms.some((m) => m.id === "w" && m.phase === "loading"), 20_000);
    await expectGoneAfterCoreKill(
      core,
      STAND_IN,
      loadMs + 1000,
      `stand-in, loading (${loadMs} ms): core SIGKILL → gone`,
    );
  }, 30_000);

  test("a chat sent at once after llama-server's SIGKILL restarts it (restarting progress, within the budget) and is served", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { script: [{ content: "first" }] });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const first = await core.request({ id: "c1", method: "chat", params: { input: "one" } }, 20_000);
    expect(first).toMatchObject({ type: "result", result: { response: "first" } });
    const [dead] = llamaChildren(core, STAND_IN);
    process.kill(dead as number, "SIGKILL");
    const again = await core.request({ id: "c2", method: "chat", params: { input: "two" } }, 20_000);
    // A restarted stand-in reads its script again from the start.
    expect(again).toMatchObject({ type: "result", result: { response: "first" } });
    const progress = core.messages.filter((m) => m.id === "c2" && m.event === "warmup_progress");
    expect(progress.map((m) => m.phase)).toContain("restarting");
    const [now] = llamaChildren(core, STAND_IN);
    expect(now).not.toBe(dead);
    const status = await core.request({ id: "s", method: "status" });
    expect(status.result.llama.restarts.used).toBe(1);
    expect(await waitUntil(() => !isAlive(dead as number), 2000)).toBe(true);
  }, 30_000);
});
