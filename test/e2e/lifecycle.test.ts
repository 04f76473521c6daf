import { describe, expect, test } from "bun:test";
import { constants, openSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, spawnCore } from "../fixtures/core-process.ts";
import { alive, waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// docs/supervisor.md: no llama-server outlives the core, however the core stops (kill -9 is covered
// by the reaping test in chat.test.ts).
const stops = ["shutdown", "stdin EOF", "SIGTERM", "SIGINT", "SIGHUP"] as const;

describe.skipIf(process.platform === "win32")("llama-server never outlives the core", () => {
  for (const how of stops) {
    test(`${how}, with a chat streaming from a server that ignores SIGTERM`, async () => {
      await using dir = tmpdir();
      const stack = writeStack(dir.path, {
        script: [{ content: "a b c d e f g h i j k l m n o p", chunk_delay_ms: 200, hang: true }],
        // Like a real llama-server with an SSE stream open (transcripts 60, 67): SIGTERM is ignored.
        knobs: { FAKE_LLAMA_IGNORE_SIGTERM: "1" },
      });
      await using core = spawnCore({ cwd: dir.path, env: stack.env });
      core.send({ id: "chat", method: "chat", params: { input: "go" } });
      await core.waitFor((ms) => ms.some((m) => m.id === "chat" && m.event === "llm_chunk"));
      const [server] = stack.recordedServers();
      expect(alive(server!)).toBe(true);
      const t0 = Date.now();
      if (how === "shutdown") core.send({ id: "bye", method: "shutdown" });
      else if (how === "stdin EOF") core.closeStdin();
      else core.proc.kill(how);
      expect(await core.exited(15_000)).toBe(0);
      // The grace period is 1 s in this config (llama.stop_grace_s), then SIGKILL.
      expect(Date.now() - t0).toBeLessThan(8000);
      expect(alive(server!)).toBe(false);
      expect(stack.recordedServers()).toEqual([]);
      // The chat was cancelled before the core went, and said so.
      expect(core.terminal("chat")).toMatchObject({ type: "error", code: "cancelled" });
      if (how === "shutdown") {
        const order = core.messages.filter((m) => m.type !== "event").map((m) => m.id);
        expect(order.indexOf("chat")).toBeLessThan(order.indexOf("bye"));
      }
    });
  }

  test("a fault no code hears: a stray rejection is logged and the core serves on; a stray throw stops it in order, exit 1", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ content: "a b c d e f g h i j k l m n o p", chunk_delay_ms: 200, hang: true }],
      // A server that outlives its core unless the core stops it (no child mode, SIGTERM ignored).
      knobs: { FAKE_LLAMA_IGNORE_SIGTERM: "1", FAKE_LLAMA_NO_CHILD_MODE: "1" },
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "chat", method: "chat", params: { input: "go" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "chat" && m.event === "llm_chunk"));
    const [server] = stack.recordedServers();
    // A run that fails must not leave the server behind (it outlives its core by design here).
    await using _ = {
      [Symbol.asyncDispose]: async () => void (alive(server!) && process.kill(server!, "SIGKILL")),
    };
    expect(alive(server!)).toBe(true);
    const stray = await core.request({ id: "r", method: "test.fail", params: { kind: "stray_rejection" } });
    expect(stray.type).toBe("error");
    expect((await core.request({ id: "p", method: "ping" })).type).toBe("result");
    expect(alive(server!)).toBe(true);
    expect(core.stderr).toContain("a promise rejected with no handler");

    core.send({ id: "t", method: "test.fail", params: { kind: "stray_throw" } });
    expect(await core.exited(15_000)).toBe(1);
    expect(alive(server!)).toBe(false);
    expect(stack.recordedServers()).toEqual([]);
    // Every request answered, the chat cancelled, and no trace on stdout.
    expect(core.terminal("chat")).toMatchObject({ type: "error", code: "cancelled" });
    expect(core.terminal("t")).toMatchObject({ type: "error" });
    for (const line of core.rawLines) expect(() => JSON.parse(line)).not.toThrow();
    expect(core.stderr).toContain("uncaught exception; stopping");
  }, 30_000);

  test("requests that arrive while the core shuts down are answered cancelled", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ content: "a b c d e f g h", chunk_delay_ms: 200, hang: true }],
      knobs: { FAKE_LLAMA_IGNORE_SIGTERM: "1" },
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    core.send({ id: "chat", method: "chat", params: { input: "go" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "chat" && m.event === "llm_chunk"));
    core.send({ id: "bye", method: "shutdown" });
    // Stopping takes the 1 s grace period (the stand-in ignores SIGTERM): ask meanwhile.
    await core.waitFor(() => core.terminal("chat") !== undefined);
    core.send({ id: "late", method: "ping" });
    core.send({ id: "late2", method: "shutdown" });
    expect(await core.exited(15_000)).toBe(0);
    expect(core.terminal("late")).toMatchObject({ type: "error", code: "cancelled" });
    expect(core.terminal("late2")).toMatchObject({ type: "result" });
    expect(core.terminal("bye")).toMatchObject({ type: "result" });
  });

  test("SIGTERM while the host reads no output and thousands of answers wait: exit 0, llama-server gone", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { tools: [] });
    // stdout a FIFO this test holds open and never reads: a frozen host. The stop used to wait
    // for every answer to be written, so the core and its llama-server ran on (docs/protocol.md).
    const fifo = join(dir.path, "stdout.fifo");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const proc = Bun.spawn([ensureBinary(), "serve-stdio"], {
      cwd: dir.path,
      stdin: "pipe",
      stdout: openSync(fifo, constants.O_RDWR),
      stderr: "ignore",
      env: { ...process.env, ...stack.env },
    });
    try {
      proc.stdin.write('{"id":"w","method":"warmup"}\n');
      proc.stdin.write(Array.from({ length: 20_000 }, (_, i) => `{"id":${i},"method":"ping"}\n`).join(""));
      proc.stdin.flush();
      expect(await waitUntil(() => stack.recordedServers().length === 1, 15_000)).toBe(true);
      const [server] = stack.recordedServers();
      await Bun.sleep(500);
      const t0 = Date.now();
      proc.kill("SIGTERM");
      const code = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => "still running")]);
      expect(code).toBe(0);
      // The drain's limit (2 s) and the stand-in's stop, not a wait for the host.
      expect(Date.now() - t0).toBeLessThan(8000);
      expect(alive(server!)).toBe(false);
    } finally {
      proc.kill("SIGKILL");
    }
  }, 40_000);
});
