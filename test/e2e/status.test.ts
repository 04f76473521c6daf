import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Msg, spawnCore } from "../fixtures/core-process.ts";
import { alive, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Issue 11 from the compiled binary against the stand-in: `status`, idle sleep, and the
// progress a chat hears while llama-server starts, wakes or restarts.

const events = (ms: Msg[], id: unknown) => ms.filter((m) => m.id === id && m.type === "event");

/** The chat's warmup_progress events: all before llm_start, at most 500 ms apart (core's clock). */
function progressOf(ms: Msg[], id: unknown): Msg[] {
  const evs = events(ms, id);
  const progress = evs.filter((e) => e.event === "warmup_progress");
  const firstLlm = evs.findIndex((e) => e.event === "llm_start");
  expect(firstLlm).toBeGreaterThan(-1);
  for (const p of progress) expect(evs.indexOf(p)).toBeLessThan(firstLlm);
  // A phase's elapsed_ms counts from the start of the wait it belongs to; within one wait,
  // consecutive events are never more than 500 ms apart.
  for (let i = 1; i < progress.length; i++) {
    const [a, b] = [progress[i - 1] as Msg, progress[i] as Msg];
    if (b.elapsed_ms >= a.elapsed_ms) expect(b.elapsed_ms - a.elapsed_ms).toBeLessThanOrEqual(500);
  }
  return progress;
}

function withIdleSleep(dir: string, seconds: number): void {
  const file = join(dir, "config.yaml");
  writeFileSync(file, readFileSync(file, "utf8").replace("llama:\n", `llama:\n  idle_sleep_s: ${seconds}\n`));
}

describe.skipIf(process.platform === "win32")("status, idle sleep and progress (compiled core)", () => {
  test("a fresh core sent initialize, ping and status in one write: status lists neither answered request (issue 19 item 8)", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    core.write(
      '{"id":"i","method":"initialize"}\n{"id":"p","method":"ping"}\n{"id":"s","method":"status"}\n',
    );
    await core.waitFor(() => ["i", "p", "s"].every((id) => core.terminal(id)));
    const order = core.messages.map((m) => m.id);
    const listed = core.terminal("s")!.result.requests.map((r: { id: string }) => r.id);
    // Whatever status lists is answered after it; whatever was answered before it is not listed.
    for (const id of ["i", "p"]) expect(listed.includes(id)).toBe(order.indexOf(id) > order.indexOf("s"));
    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  });

  test("status before, during and after a slow first start; the chat hears warmup_progress before llm_start", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ content: "Hello there" }],
      knobs: { FAKE_LLAMA_LOAD_MS: "1500" },
      // No MCP server to start first: on a busy box its start outlasted the load, and the chat
      // asked for the server only once it was ready (no loading phase to hear).
      tools: [],
    });
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const init = await core.request({ id: 0, method: "initialize" });
    expect(init.result.capabilities.methods).toContain("status");
    expect(init.result.capabilities.events).toContain("warmup_progress");

    const before = (await core.request({ id: "s0", method: "status" })).result;
    expect(before.llama).toMatchObject({ state: "stopped", pid: null, waking: false, last_error: null });
    expect(before.core.pid).toBe(core.proc.pid);
    expect(before.core.rss_bytes).toBeGreaterThan(0);
    expect(before).toMatchObject({ rpc_workers: [], requests: [] });

    core.send({ id: "c1", method: "chat", params: { input: "hi" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "c1" && m.phase === "loading"));
    const during = (await core.request({ id: "s1", method: "status" })).result;
    expect(during.llama.state).toBe("starting");
    expect(during.llama.pid).toBeGreaterThan(0);
    expect(during.requests).toHaveLength(1);
    expect(during.requests[0]).toMatchObject({ id: "c1", method: "chat" });
    expect(during.requests[0].elapsed_ms).toBeGreaterThan(0);

    await core.waitFor(() => core.terminal("c1") !== undefined, 20_000);
    expect(core.terminal("c1")).toMatchObject({ type: "result", result: { response: "Hello there" } });
    const progress = progressOf(core.messages, "c1");
    // The start began when the chat arrived; the chat hears it from when it asks for the server
    // (after its session, memory and tools), beginning with the phase current then.
    expect(["starting", "loading"]).toContain(progress[0]!.phase);
    expect(progress.at(-1)?.phase).toBe("ready");
    expect(progress.filter((p) => p.phase === "loading").length).toBeGreaterThanOrEqual(3);
    expect(progress.at(-1)?.elapsed_ms).toBeGreaterThanOrEqual(1400);

    const after = (await core.request({ id: "s2", method: "status" })).result;
    const [server] = stack.recordedServers();
    expect(after.llama).toMatchObject({
      state: "ready",
      pid: server,
      model: { path: join(dir.path, "model.gguf"), name: "synthetic llama" },
      context_per_slot: 2048,
      slots: { busy: 0, waiting: 0, total: 1 },
      idle_sleep_s: 300,
      restarts: { used: 0, max: 3, left: 3, window_s: 300, next_automatic_try_at: null },
    });
    expect(after.llama.rss_bytes).toBeGreaterThan(1024 * 1024);
    expect(after.llama.uptime_ms).toBeGreaterThan(1000);
    expect(after.requests).toEqual([]);
    // A second chat waits for nothing: no progress.
    await core.request({ id: "c2", method: "chat", params: { input: "again" } });
    expect(events(core.messages, "c2").filter((e) => e.event === "warmup_progress")).toEqual([]);

    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
    expect(alive(server as number)).toBe(false);
  }, 60_000);

  test("llama.idle_sleep_s: status says sleeping, the next chat wakes it with progress; dead while asleep → failed, the next chat restarts it", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, { knobs: { FAKE_LLAMA_LOAD_MS: "800" } });
    withIdleSleep(dir.path, 1);
    await using core = spawnCore({ cwd: dir.path, env: stack.env });
    const status = async () => (await core.request({ id: `s${Math.random()}`, method: "status" })).result;
    const until = async (pred: (s: Msg) => boolean, ms = 8000) => {
      const deadline = Date.now() + ms;
      for (;;) {
        const s = await status();
        if (pred(s)) return s;
        if (Date.now() > deadline) throw new Error(`status never matched: ${JSON.stringify(s.llama)}`);
        await Bun.sleep(100);
      }
    };

    expect((await core.request({ id: "c1", method: "chat", params: { input: "one" } }, 20_000)).type).toBe(
      "result",
    );
    expect((await status()).llama).toMatchObject({ state: "ready", idle_sleep_s: 1 });
    const asleep = await until((s) => s.llama.state === "sleeping");
    expect(asleep.llama.waking).toBe(false);

    core.send({ id: "c2", method: "chat", params: { input: "two" } });
    await core.waitFor((ms) => ms.some((m) => m.id === "c2" && m.phase === "waking"));
    expect((await status()).llama).toMatchObject({ state: "sleeping", waking: true });
    await core.waitFor(() => core.terminal("c2") !== undefined, 20_000);
    expect(core.terminal("c2")?.type).toBe("result");
    const wake = progressOf(core.messages, "c2");
    expect(wake[0]?.phase).toBe("waking");
    expect(wake.at(-1)?.phase).toBe("ready");
    expect(wake.at(-1)?.elapsed_ms).toBeGreaterThanOrEqual(700);
    expect((await status()).llama.state).toBe("ready");

    const sleeping = await until((s) => s.llama.state === "sleeping");
    const pid = sleeping.llama.pid as number;
    process.kill(pid, "SIGKILL");
    const failed = await until((s) => s.llama.state === "failed");
    expect(failed.llama.last_error.message).toContain("crashed");
    expect(failed.llama.restarts).toMatchObject({ used: 0, left: 3 });

    const c3 = await core.request({ id: "c3", method: "chat", params: { input: "three" } }, 20_000);
    expect(c3.type).toBe("result");
    const restart = progressOf(core.messages, "c3");
    expect(restart[0]).toMatchObject({ phase: "restarting", backoff_ms: 500 });
    expect(restart.map((p) => p.phase)).toEqual(expect.arrayContaining(["starting", "loading", "ready"]));
    const back = await status();
    expect(back.llama).toMatchObject({ state: "ready", restarts: { used: 1, left: 2 } });
    expect(back.llama.pid).not.toBe(pid);

    await core.request({ id: "bye", method: "shutdown" });
    expect(await core.exited()).toBe(0);
  }, 60_000);

  test("llama.idle_sleep_s negative or absurd → config_invalid naming the key; status still answers", async () => {
    await using dir = tmpdir();
    writeStack(dir.path);
    for (const bad of [-1, 99_999_999]) {
      withIdleSleep(dir.path, bad);
      await using core = spawnCore({ cwd: dir.path });
      const r = await core.request({ id: 1, method: "chat", params: { input: "hi" } });
      expect(r).toMatchObject({ type: "error", code: "config_invalid", data: { key: "llama.idle_sleep_s" } });
      expect((await core.request({ id: 2, method: "status" })).result.llama.state).toBe("stopped");
      await core.request({ id: 3, method: "shutdown" });
      expect(await core.exited()).toBe(0);
      // Back to the file as written, for the next value.
      writeFileSync(
        join(dir.path, "config.yaml"),
        readFileSync(join(dir.path, "config.yaml"), "utf8").replace(`  idle_sleep_s: ${bad}\n`, ""),
      );
    }
  }, 60_000);
});
