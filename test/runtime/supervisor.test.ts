import { describe, expect, spyOn, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { NOT_LOGGED } from "../../src/runtime/log-redact.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import { watchProgress } from "../../src/runtime/watchdog.ts";
import { logger } from "../../src/util/logger.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { chatBody, makeSupervisor, pidAlive, rejection, waitFor } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

describe.skipIf(process.platform === "win32")("supervisor against the stand-in", () => {
  test("starts on 127.0.0.1 with a per-launch key in the env, reports progress, serves chats", async () => {
    await using dir = tmpdir();
    const envLog = join(dir.path, "env.txt");
    const { supervisor, dataDir } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_ENV_LOG: envLog, LLAMA_ARG_PORT: "1", LLAMA_API_KEY: "inherited" },
    });
    const progress: StartProgress[] = [];
    const lease = await supervisor.acquire(never(), (p) => progress.push(p));
    try {
      expect(lease.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(lease.apiKey).toMatch(/^[0-9a-f]{64}$/);
      expect(progress[0]).toMatchObject({ phase: "starting", attempt: 1 });
      expect(progress.at(-1)?.phase).toBe("ready");
      // The key is not on the command line; inherited LLAMA_ARG_*/LLAMA_API_KEY never reach the child.
      const pid = supervisor.pid() as number;
      expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain(lease.apiKey);
      const envNames = readFileSync(envLog, "utf8").split("\n");
      expect(envNames).toContain("LLAMA_API_KEY");
      expect(envNames).not.toContain("LLAMA_ARG_PORT");
      // Our key works; no key is refused; /health stays public.
      const auth = { Authorization: `Bearer ${lease.apiKey}` };
      const ok = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: auth,
        body: chatBody(false),
      });
      expect(ok.status).toBe(200);
      expect(
        ((await ok.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content,
      ).toBe("You said: hello");
      expect((await fetch(`${lease.baseUrl}/v1/models`)).status).toBe(401);
      expect((await fetch(`${lease.baseUrl}/health`)).status).toBe(200);
      // The pid record and the log file exist while it runs.
      expect(readdirSync(join(dataDir, "run")).some((n) => n.startsWith("llama-server-"))).toBe(true);
      expect(readFileSync(join(dataDir, "logs", "llama-server.log"), "utf8")).toContain("model loaded");
    } finally {
      lease.release();
      await supervisor.stop();
    }
    expect(supervisor.currentState()).toBe("stopped");
    expect(readdirSync(join(dataDir, "run")).filter((n) => n.endsWith(".json"))).toEqual([]);
  });

  test("whether it reads images is known once the serving server's /props was read, and not after it stops", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path);
    expect(supervisor.readsImages()).toBeUndefined();
    const lease = await supervisor.acquire(never());
    try {
      const props = await lease.launch.props(never());
      expect(props?.modalities?.vision).toBe(false);
      expect(supervisor.readsImages()).toBe(false);
    } finally {
      lease.release();
      await supervisor.stop();
    }
    expect(supervisor.readsImages()).toBeUndefined();
  });

  test("a slow load that keeps logging outlives the start-up timeout", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_LOAD_MS: "2500", FAKE_LLAMA_LOAD_LOG_EVERY_MS: "200" },
      settings: { startupTimeoutMs: 1000 },
    });
    const phases: string[] = [];
    const lease = await supervisor.acquire(never(), (p) => phases.push(p.phase));
    lease.release();
    await supervisor.stop();
    expect(phases).toContain("loading");
    expect(phases.at(-1)).toBe("ready");
  });

  const failures: [string, string, string, RegExp][] = [
    [
      "missing model",
      "E gguf_init_from_file: failed to open GGUF file 'm.gguf' (No such file or directory)",
      "model_missing",
      /cannot be opened/,
    ],
    [
      "truncated model",
      "E llama_model_load: error loading model: tensor 'token_embd.weight' data is not within the file bounds, model is corrupted or incomplete",
      "model_missing",
      /truncated/,
    ],
    [
      "not a GGUF",
      "E gguf_init_from_reader: invalid magic characters: 'this', expected 'GGUF'",
      "model_missing",
      /not a GGUF/,
    ],
    [
      "out of memory",
      "E ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 68719476736",
      "model_plan_error",
      /out of memory/,
    ],
    ["anything else", "E something odd happened", "internal_error", /exited with code 3/],
  ];
  for (const [name, line, code, message] of failures) {
    test(`an exit during start-up (${name}) → ${code} with the log tail`, async () => {
      await using dir = tmpdir();
      const { supervisor } = makeSupervisor(dir.path, {
        env: { FAKE_LLAMA_FAIL_START: line, FAKE_LLAMA_FAIL_EXIT: name === "anything else" ? "3" : "1" },
      });
      const err = await rejection(supervisor.acquire(never()));
      expect(err).toBeInstanceOf(CoreError);
      expect(err.code).toBe(code as CoreError["code"]);
      expect(err.message).toMatch(message);
      expect(((err.data?.log_tail ?? []) as string[]).join("\n")).toContain(line.slice(2));
      expect(supervisor.currentState()).toBe("stopped");
      await supervisor.stop();
    });
  }

  test("a model file gone since the plan, the exit's last log lines lost → model_missing from the file itself", async () => {
    // A real llama-server logs through a thread of its own: on a busy machine its exit can come
    // before "failed to open GGUF file" is written (1 start in 20 under load, b10587).
    await using dir = tmpdir();
    const h = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_LOG_LOST_AT_EXIT: "1" },
    });
    rmSync(h.model);
    const err = await rejection(h.supervisor.acquire(never()));
    expect(err.code).toBe("model_missing");
    expect(err.message).toContain(h.model);
    await h.supervisor.stop();
  });

  test("the stand-in's own model check: a file that is not a GGUF → model_missing", async () => {
    await using dir = tmpdir();
    const h = makeSupervisor(dir.path);
    writeFileSync(h.model, "this is not a model");
    const err = await rejection(h.supervisor.acquire(never()));
    expect(err.code).toBe("model_missing");
    expect(err.message).toContain("not a GGUF");
  });

  test("binary missing → binary_missing naming the paths tried", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, {
      options: { findBinary: () => ({ tried: ["/nowhere/llama-server", "/also/not"] }) },
    });
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("binary_missing");
    expect(err.data?.tried).toEqual(["/nowhere/llama-server", "/also/not"]);
  });

  test("a binary that is not llama-server (exits at once with garbage) → internal_error", async () => {
    await using dir = tmpdir();
    const garbage = join(dir.path, "garbage");
    writeFileSync(garbage, "#!/bin/sh\necho 'hello from not-llama'\nexit 2\n", { mode: 0o755 });
    const { supervisor } = makeSupervisor(dir.path, { options: { findBinary: () => ({ path: garbage }) } });
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("internal_error");
    expect(err.data?.log_tail).toContain("hello from not-llama");
  });

  test("a binary that never opens its port fails within the start-up timeout, and is killed", async () => {
    await using dir = tmpdir();
    const sleeper = join(dir.path, "sleeper");
    const pidFile = join(dir.path, "sleeper.pid");
    writeFileSync(sleeper, `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 60\n`, { mode: 0o755 });
    const { supervisor } = makeSupervisor(dir.path, {
      settings: { startupTimeoutMs: 800 },
      options: { findBinary: () => ({ path: sleeper }) },
    });
    const t0 = Date.now();
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("internal_error");
    expect(err.message).toContain("never answered");
    expect(Date.now() - t0).toBeLessThan(8000);
    const pid = Number(readFileSync(pidFile, "utf8"));
    expect(pid).toBeGreaterThan(0);
    expect(await waitFor(() => !pidAlive(pid), { timeoutMs: 3000 })).toBe(true);
  });

  test("a port taken by another program: bind failure, another port, ready", async () => {
    await using dir = tmpdir();
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("not llama") });
    const ports = [blocker.port as number];
    const { supervisor } = makeSupervisor(dir.path, {
      options: { pickPort: async () => ports.shift() ?? pickFreePort() },
    });
    const progress: StartProgress[] = [];
    try {
      const lease = await supervisor.acquire(never(), (p) => progress.push(p));
      expect(lease.baseUrl).not.toContain(`:${blocker.port}`);
      expect(progress.filter((p) => p.phase === "starting").length).toBe(2);
      lease.release();
    } finally {
      blocker.stop(true);
      await supervisor.stop();
    }
  });

  test("ports always taken: bounded attempts, then an error", async () => {
    await using dir = tmpdir();
    const blocker = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("x") });
    const { supervisor } = makeSupervisor(dir.path, {
      options: { pickPort: async () => blocker.port as number, maxBindAttempts: 3 },
    });
    const attempts: number[] = [];
    const err = await rejection(
      supervisor.acquire(never(), (p) => p.phase === "starting" && attempts.push(p.attempt)),
    );
    blocker.stop(true);
    expect(err.message).toContain("port in use");
    expect(attempts).toEqual([1, 2, 3]);
  });

  test("an --api-key in extra_args is accepted beside ours (76b), and never on the command line", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { extraArgs: ["--api-key", "someone-elses"] });
    const lease = await supervisor.acquire(never());
    try {
      const pid = supervisor.pid() as number;
      expect(readFileSync(`/proc/${pid}/cmdline`, "utf8")).not.toContain("someone-elses");
      // The stand-in takes every key, as llama-server does: the user's works too.
      const models = await fetch(`${lease.baseUrl}/v1/models`, {
        headers: { Authorization: "Bearer someone-elses" },
      });
      expect(models.status).toBe(200);
    } finally {
      lease.release();
    }
  });

  test("a crash mid-request aborts the lease's died signal; the next acquire restarts", async () => {
    await using dir = tmpdir();
    const script = join(dir.path, "script.json");
    writeFileSync(
      script,
      JSON.stringify([{ content: "one two three four five six", crash_after_chunks: 3 }]),
    );
    const { supervisor } = makeSupervisor(dir.path, { env: { FAKE_LLAMA_SCRIPT: script } });
    const lease = await supervisor.acquire(never());
    const firstPid = supervisor.pid();
    // A loaded box may see the exit before fetch has read the headers: then fetch itself
    // rejects with the died signal's reason (CI met it).
    const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${lease.apiKey}` },
      body: chatBody(true),
      signal: lease.died,
    }).catch(() => undefined);
    await res?.text().catch(() => "");
    expect(await waitFor(() => lease.died.aborted)).toBe(true);
    expect((lease.died.reason as CoreError).message).toMatch(/crashed \(killed by SIGKILL\)/);
    lease.release();
    // The script is used up, so the restarted server answers the default reply. (A restarted
    // stand-in re-reads the script from the start; this one had a single entry.)
    writeFileSync(script, "[]");
    const again = await supervisor.acquire(never());
    expect(supervisor.pid()).not.toBe(firstPid);
    const ok = await fetch(`${again.baseUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { Authorization: `Bearer ${again.apiKey}` },
      body: chatBody(false),
    });
    expect(ok.status).toBe(200);
    again.release();
    await supervisor.stop();
  });

  test("restart budget: after max_restarts crashes, acquire fails without restarting", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { settings: { maxRestarts: 1, restartBackoffMs: 10 } });
    for (let i = 0; i < 2; i++) {
      const lease = await supervisor.acquire(never());
      process.kill(supervisor.pid() as number, "SIGKILL");
      expect(await waitFor(() => lease.died.aborted)).toBe(true);
      lease.release();
    }
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("internal_error");
    expect(err.message).toContain("not restarting");
    await supervisor.stop();
  });

  test("the log's line of why it restarts quotes none of the request llama-server's answer quoted", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path);
    const lease = await supervisor.acquire(never());
    const lines: string[] = [];
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      lease.reportFailure(
        "llama-server answered HTTP 500: [json.exception.parse_error.101] parse error; last read: '\"the AARDVARK secret'",
      );
    } finally {
      warn.mockRestore();
    }
    const line = lines.find((l) => l.includes("failed a request"));
    expect(line).toContain(`last read: ${NOT_LOGGED}`);
    expect(line).not.toContain("AARDVARK");
    lease.release();
    await supervisor.stop();
  });

  test("the error other leases and status get for that restart quotes none of it either", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path);
    const lease = await supervisor.acquire(never());
    const warn = spyOn(logger, "warn").mockImplementation(() => {});
    try {
      lease.reportFailure(
        "llama-server: [json.exception.parse_error.101] parse error; last read: '\"the AARDVARK secret'",
      );
    } finally {
      warn.mockRestore();
    }
    // What every lease on that server is told, whichever chat's request failed.
    expect(lease.died.aborted).toBe(true);
    const told = (lease.died.reason as CoreError).message;
    expect(told).toContain("stopped serving");
    expect(told).not.toContain("AARDVARK");
    await waitFor(() => supervisor.snapshot().lastError !== null);
    expect(supervisor.snapshot().lastError?.message).not.toContain("AARDVARK");
    lease.release();
    await supervisor.stop();
  });

  test("a wedged server (health fine, requests hang) is restarted through reportFailure", async () => {
    await using dir = tmpdir();
    const script = join(dir.path, "script.json");
    writeFileSync(script, JSON.stringify([{ hang: true }]));
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_SCRIPT: script },
      settings: { requestTimeoutMs: 600 },
    });
    const lease = await supervisor.acquire(never());
    const wedgedPid = supervisor.pid() as number;
    const watch = watchProgress(lease, never());
    const err = await rejection(
      fetch(`${lease.baseUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { Authorization: `Bearer ${lease.apiKey}` },
        body: chatBody(true),
        signal: watch.signal,
      }),
    );
    watch.dispose();
    // The watchdog's own reason, not a fetch that failed some other way.
    expect((err as unknown as Error).message).toBe(
      "llama-server stopped responding: no progress for 1 s (llama.request_timeout_s)",
    );
    expect(lease.died.aborted).toBe(true);
    lease.release();
    writeFileSync(script, "[]");
    const again = await supervisor.acquire(never());
    expect(supervisor.pid()).not.toBe(wedgedPid);
    expect(await waitFor(() => !pidAlive(wedgedPid))).toBe(true);
    again.release();
    await supervisor.stop();
  });

  test("stop: SIGTERM, then SIGKILL after the grace period for a child that ignores SIGTERM", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_IGNORE_SIGTERM: "1" },
      settings: { stopGraceMs: 700 },
    });
    const lease = await supervisor.acquire(never());
    const pid = supervisor.pid() as number;
    lease.release();
    const t0 = Date.now();
    await supervisor.stop();
    const took = Date.now() - t0;
    expect(took).toBeGreaterThanOrEqual(600);
    expect(pidAlive(pid)).toBe(false);
    expect(await rejection(supervisor.acquire(never()))).toMatchObject({ code: "cancelled" });
  });

  test("concurrent acquire callers share one start", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { slots: 3, env: { FAKE_LLAMA_LOAD_MS: "300" } });
    let starts = 0;
    const leases = await Promise.all(
      [0, 1, 2].map(() => supervisor.acquire(never(), (p) => p.phase === "starting" && starts++)),
    );
    // Every caller hears the one start's progress; one process serves them all.
    expect(starts).toBe(3);
    expect(new Set(leases.map((l) => l.baseUrl)).size).toBe(1);
    for (const l of leases) l.release();
    await supervisor.stop();
  });

  test("slots: extra callers wait for a release; an abort while waiting rejects with its reason", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { slots: 1 });
    const first = await supervisor.acquire(never());
    expect(supervisor.slots()).toBe(1);
    let secondGot = false;
    const second = supervisor.acquire(never()).then((l) => {
      secondGot = true;
      return l;
    });
    const cancel = new AbortController();
    const third = supervisor.acquire(cancel.signal);
    await Bun.sleep(200); // nothing marks "still waiting": give it time to (wrongly) get a slot
    expect(secondGot).toBe(false);
    cancel.abort(new CoreError("cancelled", "the request was cancelled"));
    expect(await rejection(third)).toMatchObject({ code: "cancelled" });
    first.release();
    first.release(); // a second release is a no-op, not a second slot
    const l2 = await second;
    expect(secondGot).toBe(true);
    l2.release();
    await supervisor.stop();
  });

  test("stop() during a start: the start gives up, kills its child, and the waiting caller is cancelled", async () => {
    await using dir = tmpdir();
    const { supervisor, dataDir } = makeSupervisor(dir.path, { env: { FAKE_LLAMA_LOAD_MS: "5000" } });
    const pending = rejection(supervisor.acquire(never()));
    expect(await waitFor(() => supervisor.snapshot().pid !== null)).toBe(true);
    const snap = supervisor.snapshot();
    expect(snap.state).toBe("starting");
    const pid = snap.pid as number;
    const t0 = Date.now();
    await supervisor.stop();
    expect(Date.now() - t0).toBeLessThan(3000);
    expect((await pending).code).toBe("cancelled");
    expect(await waitFor(() => !pidAlive(pid), { timeoutMs: 3000 })).toBe(true);
    expect(supervisor.snapshot().state).toBe("closed");
    expect(supervisor.currentState()).toBe("stopped");
    expect(readdirSync(join(dataDir, "run")).filter((n) => n.endsWith(".json"))).toEqual([]);
  });

  test("snapshot: pid, start and ready times, slots busy, and the last crash while stopped", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { slots: 2 });
    expect(supervisor.snapshot()).toMatchObject({ state: "stopped", pid: null, lastError: null });
    const before = Date.now();
    const lease = await supervisor.acquire(never());
    const ready = supervisor.snapshot();
    expect(ready).toMatchObject({
      state: "ready",
      pid: supervisor.pid(),
      slots: { busy: 1, waiting: 0, total: 2 },
    });
    expect(ready.startedAt as number).toBeGreaterThanOrEqual(before);
    expect(ready.readyAt as number).toBeGreaterThanOrEqual(ready.startedAt as number);
    process.kill(supervisor.pid() as number, "SIGKILL");
    expect(await waitFor(() => lease.died.aborted)).toBe(true);
    lease.release();
    const down = supervisor.snapshot();
    expect(down).toMatchObject({ state: "stopped", pid: null, restartPending: true, slots: { busy: 0 } });
    expect(down.lastError?.message).toContain("crashed");
    await supervisor.stop();
  });

  test("stderr goes to the rotating log file, never to our stdout, and the file rotates", async () => {
    await using dir = tmpdir();
    const { supervisor, dataDir } = makeSupervisor(dir.path, {
      settings: { logMaxBytes: 400, logFiles: 3 },
      env: { FAKE_LLAMA_LOAD_MS: "600", FAKE_LLAMA_LOAD_LOG_EVERY_MS: "50" },
    });
    (await supervisor.acquire(never())).release();
    await supervisor.stop();
    const logs = readdirSync(join(dataDir, "logs")).sort();
    expect(logs).toEqual([".redacted-4", "llama-server.log", "llama-server.log.1", "llama-server.log.2"]);
    expect(supervisor.tail.last().some((l) => l.includes("listening on"))).toBe(true);
    expect(existsSync(join(dataDir, "logs", "llama-server.log.3"))).toBe(false);
  });
});
