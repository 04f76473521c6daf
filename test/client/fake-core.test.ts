import { afterEach, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isLocalAiError, LocalAiClient, type LocalAiError } from "../../src/client/index.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import {
  isAlive,
  killFakes,
  options,
  pidWhenWritten,
  rejection,
  startFake,
  track,
} from "./fake-core-fixture.ts";

// The client against a scripted stand-in core: the bad input the real core never produces.
afterEach(killFakes);

describe("client against a fake core", () => {
  test("initialize runs on start and requests get their own results", async () => {
    const client = await startFake();
    expect(client.info?.server.name).toBe("fake-core");
    const [a, b] = await Promise.all([client.request("echo", { n: 1 }), client.request("echo", { n: 2 })]);
    expect(a).toEqual({ method: "echo", params: { n: 1 } });
    expect(b).toEqual({ method: "echo", params: { n: 2 } });
  });

  test("malformed lines are logged and ignored; other calls still complete", async () => {
    const warnings: string[] = [];
    const client = await startFake({ logger: { warn: (m) => warnings.push(m) } });
    const results = await Promise.all([client.request("garbage"), client.request("echo", { ok: true })]);
    expect(results[0]).toEqual({ survived: true });
    expect(results[1]).toEqual({ method: "echo", params: { ok: true } });
    expect(client.malformedLines).toBe(3);
    expect(warnings.some((w) => w.includes("not JSON"))).toBe(true);
  });

  test("a broken terminal message rejects that call with protocol_error, and only that call", async () => {
    const client = await startFake();
    const other = client.request("hang", {}, { timeoutMs: 0 });
    expect((await rejection(client.request("broken_error"))).code).toBe("protocol_error");
    expect((await rejection(client.request("broken_result"))).code).toBe("protocol_error");
    expect(await client.ping().catch((e: LocalAiError) => e.code)).toBe("unknown_method");
    client.kill();
    expect((await rejection(other)).code).toBe("client_closed");
  });

  test("an answer over maxLineBytes fails its call at once with protocol_error, not a timeout", async () => {
    const warnings: string[] = [];
    const client = await startFake({ maxLineBytes: 4096, logger: { warn: (m) => warnings.push(m) } });
    const started = Date.now();
    const err = await rejection(client.request("huge_result", { bytes: 10_000 }, { timeoutMs: 20_000 }));
    expect(Date.now() - started).toBeLessThan(5000);
    expect(err.code).toBe("protocol_error");
    expect(err.method).toBe("huge_result");
    expect(err.message).toContain("over this client's maxLineBytes (4096)");
    expect((err.data as { line_bytes: number }).line_bytes).toBeGreaterThan(10_000);
    expect(warnings.some((w) => w.includes("exceeds maxLineBytes (4096)"))).toBe(true);
    // The connection goes on.
    expect(await client.request("echo", { ok: 1 })).toEqual({ method: "echo", params: { ok: 1 } });
  });

  test("protocol errors carry the core's code and data", async () => {
    const client = await startFake();
    const err = await rejection(client.request("nope", { x: 1 }));
    expect(err.code).toBe("unknown_method");
    expect(err.data).toEqual({ method: "nope" });
    expect(err.method).toBe("nope");
    expect(isLocalAiError(err, "unknown_method")).toBe(true);
  });

  test("a per-call timeout rejects with timeout and later answers are ignored", async () => {
    const client = await startFake();
    const started = Date.now();
    const err = await rejection(client.request("hang", {}, { timeoutMs: 200 }));
    expect(err.code).toBe("timeout");
    expect(err.data).toEqual({ timeout_ms: 200 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(150);
    expect(await client.request("echo", { after: 1 })).toEqual({ method: "echo", params: { after: 1 } });
  });

  test("a time limit too long for a timer is no limit, not an instant timeout", async () => {
    const client = await startFake();
    expect(await client.request("echo", { n: 1 }, { timeoutMs: 2 ** 31 })).toEqual({
      method: "echo",
      params: { n: 1 },
    });
  });

  test("a chat that times out is cancelled on the core's side too", async () => {
    const client = await startFake();
    const chat = client.chat({ input: "hang" }, { timeoutMs: 300 });
    expect((await rejection(chat.result)).code).toBe("timeout");
    // The fake core answers a cancel for a chat it still holds with cancelled: true, so a
    // second cancel now finds nothing: the client's own cancel got there first.
    await Bun.sleep(100); // nothing the client shows marks its own cancel's arrival: give it time
    expect(await client.cancel(chat.id)).toBe(false);
  });

  test("an unexpected exit rejects every pending call with core_exited and the stderr tail", async () => {
    const exits: unknown[] = [];
    const client = await startFake({ onExit: (info) => exits.push(info) });
    const hanging = client.request("hang", {}, { timeoutMs: 0 });
    const chat = client.chat({ input: "hang" });
    const dying = client.request("die");
    for (const p of [hanging, chat.result, dying]) {
      const err = await rejection(p);
      expect(err.code).toBe("core_exited");
      expect(err.data?.exit_code).toBe(3);
      expect(err.data?.stderr_tail).toContain("fake core: dying on request");
    }
    expect(exits).toHaveLength(1);
    // Without restart, later calls fail at once instead of hanging, and say why.
    const late = await rejection(client.ping());
    expect(late.code).toBe("core_exited");
    expect(late.message).toContain("exited with code 3");
    expect(late.data?.exit_code).toBe(3);
    expect(late.data?.stderr_tail).toContain("fake core: dying on request");
    expect(client.running).toBe(false);
  });

  test("the iterator of a chat whose core dies throws core_exited after the events it got", async () => {
    const client = await startFake();
    const chat = client.chat({ input: "hang" });
    const seen: string[] = [];
    const loop = (async () => {
      for await (const ev of chat) {
        seen.push(ev.event);
        if (ev.event === "llm_chunk" && ev.delta === "lo") void client.request("die").catch(() => {});
      }
    })();
    expect((await rejection(loop)).code).toBe("core_exited");
    expect(seen).toEqual(["run_start", "llm_chunk", "llm_chunk"]);
  });

  test("restarts with back-off after an unexpected exit, and calls made meanwhile succeed", async () => {
    await using dir = tmpdir();
    const launches = join(dir.path, "launches");
    const restarts: { attempt: number; delayMs: number }[] = [];
    const client = await startFake(
      { restart: { initialDelayMs: 100 }, onRestart: (r) => restarts.push(r) },
      { FAKE_CORE_LAUNCHES: launches },
    );
    const firstPid = client.pid;
    expect((await rejection(client.request("die"))).code).toBe("core_exited");
    const pong = await client.request("echo", { again: true });
    expect(pong).toEqual({ method: "echo", params: { again: true } });
    expect(client.pid).not.toBe(firstPid);
    expect(restarts).toEqual([{ attempt: 1, delayMs: 100 }]);
    expect(readFileSync(launches, "utf8").trim().split("\n")).toHaveLength(2);
    // A second crash doubles the delay.
    await rejection(client.request("die"));
    await client.request("echo");
    expect(restarts[1]).toEqual({ attempt: 2, delayMs: 200 });
  });

  test("gives up after maxRestarts and rejects what waited", async () => {
    await using dir = tmpdir();
    const launches = join(dir.path, "launches");
    const env: Record<string, string | undefined> = { ...process.env, FAKE_CORE_LAUNCHES: launches };
    const client = await LocalAiClient.start({
      ...options({ restart: { maxRestarts: 2, initialDelayMs: 50 } }),
      env,
    });
    track(client);
    // Every relaunch dies at start-up from now on (the client passes this env object on each spawn).
    env.FAKE_CORE_DIE_AT_START = "1";
    await rejection(client.request("die"));
    const err = await rejection(client.request("echo", {}, { timeoutMs: 0 }));
    expect(err.code).toBe("core_exited");
    expect(err.data?.exit_code).toBe(7);
    expect(readFileSync(launches, "utf8").trim().split("\n")).toHaveLength(3);
    const late = await rejection(client.ping());
    expect(late.code).toBe("core_exited");
    expect(late.data?.exit_code).toBe(7);
    expect(late.data?.stderr_tail).toEqual(["fake core: refusing to start"]);
  });

  test("a binary that cannot be spawned rejects start with core_exited", async () => {
    const err = await rejection(LocalAiClient.start({ binary: "/nonexistent/local-ai" }));
    expect(err.code).toBe("core_exited");
    expect(String(err.data?.spawn_error)).toContain("ENOENT");
    // The code once, not Bun's message prefixed with it again.
    expect(err.message).not.toContain("ENOENT: ENOENT");
    expect(String(err.data?.spawn_error)).toContain("/nonexistent/local-ai");
  });

  test("a cwd that is no folder is named in spawn_error, not taken for a missing binary", async () => {
    // Node and Bun both say `spawn <binary> ENOENT` (or ENOTDIR) for it, the binary being there.
    await using dir = tmpdir();
    const file = join(dir.path, "a-file");
    writeFileSync(file, "");
    for (const cwd of [join(dir.path, "gone"), file]) {
      const err = await rejection(LocalAiClient.start(options({ cwd })));
      expect(err.code).toBe("core_exited");
      expect(String(err.data?.spawn_error)).toContain(`cwd ${cwd}`);
      expect(err.message).toContain(`cwd ${cwd}`);
    }
  });

  test("a spawn that throws (ENOTDIR) rejects start as any spawn failure does, with spawn_error", async () => {
    // Node and Bun throw this one from spawn() instead of emitting it, as they do ENOENT.
    await using dir = tmpdir();
    const file = join(dir.path, "not-a-folder");
    writeFileSync(file, "");
    const exits: { expected: boolean }[] = [];
    const listeners = process.listenerCount("exit");
    const err = await rejection(
      LocalAiClient.start({ binary: join(file, "local-ai"), onExit: (i) => exits.push(i) }),
    );
    expect(err.code).toBe("core_exited");
    expect(err.message).toContain("could not be started");
    expect(String(err.data?.spawn_error)).toContain("ENOTDIR");
    expect(err.data?.stderr_tail).toEqual([]);
    expect(exits).toHaveLength(1);
    expect(process.listenerCount("exit")).toBe(listeners);
  });

  test("a core that dies at start-up rejects start and shows why", async () => {
    const err = await rejection(LocalAiClient.start(options({}, { FAKE_CORE_DIE_AT_START: "1" })));
    expect(err.code).toBe("core_exited");
    expect(err.data?.stderr_tail).toEqual(["fake core: refusing to start"]);
  });

  test("shutdown kills a core that ignores it, after the timeout", async () => {
    const exits: { expected: boolean; signal: string | null }[] = [];
    const client = await startFake({ onExit: (i) => exits.push(i) }, { FAKE_CORE_IGNORE_SHUTDOWN: "1" });
    const pending = client.request("hang", {}, { timeoutMs: 0 });
    await client.shutdown({ timeoutMs: 300 });
    expect(exits).toEqual([expect.objectContaining({ expected: true, signal: "SIGKILL" })]);
    expect((await rejection(pending)).code).toBe("client_closed");
    expect((await rejection(client.ping())).code).toBe("client_closed");
  });

  test("close() shorter than the core's stop grace does not kill it while it stops its child", async () => {
    // Issue 10 item 6: killing the core before it could stop llama-server left llama-server
    // running. This core needs the core's default grace (3 s) to stop a child ignoring SIGTERM.
    await using dir = tmpdir();
    const pidFile = join(dir.path, "child.pid");
    const exits: { expected: boolean; code: number | null; signal: string | null }[] = [];
    const client = await startFake(
      { onExit: (i) => exits.push(i) },
      { FAKE_CORE_CHILD_GRACE_MS: "3000", FAKE_CORE_CHILD_PID: pidFile },
    );
    const childPid = await pidWhenWritten(pidFile);
    try {
      await client.close({ timeoutMs: 1000 });
      expect(exits).toEqual([expect.objectContaining({ expected: true, code: 0, signal: null })]);
      expect(isAlive(childPid)).toBe(false);
    } finally {
      if (isAlive(childPid)) process.kill(childPid, "SIGKILL");
    }
  }, 20_000);

  test("chat streams typed events, routes unknown ones aside and resolves its result", async () => {
    const client = await startFake();
    const other: string[] = [];
    const chat = client.chat({ input: "hi" }, { onOtherEvent: (e) => other.push(e.event) });
    let text = "";
    for await (const ev of chat) if (ev.event === "llm_chunk") text += ev.delta;
    expect(text).toBe("Hello");
    expect(other).toEqual(["future_event"]);
    expect((await chat.result).response).toBe("Hello");
  });

  test("an AbortSignal cancels a chat through the core", async () => {
    const client = await startFake();
    const ac = new AbortController();
    const chat = client.chat({ input: "hang" }, { signal: ac.signal });
    for await (const ev of chat) {
      if (ev.event === "llm_chunk") {
        ac.abort();
        break;
      }
    }
    expect((await rejection(chat.result)).code).toBe("cancelled");
  });
});
