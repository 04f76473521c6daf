import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { CoreError } from "../../src/protocol/errors.ts";
import { StateLines } from "../../src/runtime/child-state.ts";
import {
  type Exit,
  HARD_CAP_FACTOR,
  politeStopWait,
  type Spawned,
  spawnServer,
  startupOverdue,
  stopChild,
  verifyOwnKey,
  waitUntilHealthy,
} from "../../src/runtime/launch-steps.ts";
import { LogTail } from "../../src/runtime/log-sink.ts";
import { addressSpaceGone, memoryReleased } from "../../src/runtime/proc-memory.ts";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// The launch steps one at a time, against small HTTP stubs and a hand-made child: no
// llama-server, no stand-in process.

const KEY = "k".repeat(64);

/** A stub on 127.0.0.1 answering (path, authorization) → status. */
function stub(answer: (path: string, auth: string | null) => number) {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) =>
      new Response("{}", { status: answer(new URL(req.url).pathname, req.headers.get("authorization")) }),
  });
}

/** A Spawned for a child that is not a real process; `exit()` makes it exit. */
function fakeSpawned(port: number): { spawned: Spawned; exit: (e: Exit) => void } {
  const exited = Promise.withResolvers<Exit>();
  const empty = new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const spawned: Spawned = {
    child: {
      pid: 2 ** 30, // no such process: /proc gives no fingerprint
      stdout: empty,
      stderr: empty,
      exited: exited.promise,
      politeSignal: true,
      writeLine: () => false,
      terminate: () => {},
      kill: () => {},
    },
    binary: "/nonexistent/llama-server",
    argv: [],
    port,
    apiKey: KEY,
    baseUrl: `http://127.0.0.1:${port}`,
    t0: Date.now(),
    tail: new LogTail(),
    lastLine: Date.now(),
    drained: Promise.resolve(),
    exit: undefined,
    exited: exited.promise.then((e) => {
      spawned.exit = e;
      return e;
    }),
    states: new StateLines(),
  };
  return { spawned, exit: exited.resolve };
}

const ourServer = (path: string, auth: string | null) =>
  path === "/v1/models" ? (auth === `Bearer ${KEY}` ? 200 : 401) : 200;

describe("verifyOwnKey", () => {
  test("our child: no key refused, our key accepted → passes", async () => {
    using server = stub(ourServer);
    const { spawned } = fakeSpawned(server.port as number);
    expect(await verifyOwnKey(spawned)).toBeNull();
  });

  test("another program that answers everything → port in use, try another port", async () => {
    using server = stub(() => 200);
    const { spawned } = fakeSpawned(server.port as number);
    const failure = await verifyOwnKey(spawned);
    expect(failure?.retryPort).toBe(true);
    expect(failure?.error.message).toContain("port in use");
  });

  test("another llama-server on the port (another core's, its own key) → port in use, try another port", async () => {
    // It took the port between our pick and our child's bind; our child, still starting, has not
    // failed its bind yet. Ours accepts our key whatever keys extra_args add (76b): it cannot refuse it.
    using server = stub((path) => (path === "/v1/models" ? 401 : 200));
    const { spawned } = fakeSpawned(server.port as number);
    const failure = await verifyOwnKey(spawned);
    expect(failure?.retryPort).toBe(true);
    expect(failure?.error.message).toContain("port in use");
  });
});

describe("waitUntilHealthy", () => {
  const wait = (signal = new AbortController().signal, events: StartProgress[] = []) => ({
    startupTimeoutMs: 5000,
    intervalMs: 20,
    signal,
    emit: (p: StartProgress) => events.push(p),
  });

  test("503 while loading, then 200: ready, with a loading event", async () => {
    let polls = 0;
    using server = stub((path) => (path === "/health" && ++polls >= 3 ? 200 : 503));
    const { spawned } = fakeSpawned(server.port as number);
    const events: StartProgress[] = [];
    expect(await waitUntilHealthy(spawned, wait(undefined, events))).toBeNull();
    expect(polls).toBe(3);
    expect(events[0]?.phase).toBe("loading");
  });

  test("an exit while waiting is classified from the launch's log", async () => {
    using server = stub(() => 503);
    const { spawned, exit } = fakeSpawned(server.port as number);
    spawned.tail.push("E gguf_init_from_reader: invalid magic characters: 'this', expected 'GGUF'");
    setTimeout(() => exit({ code: 1, signal: null }), 30);
    const failure = await waitUntilHealthy(spawned, wait());
    expect(failure?.error.code).toBe("model_missing");
    expect(failure?.error.data?.exit_code).toBe(1);
  });

  test("stop() meanwhile: gives up at once with the abort's reason", async () => {
    using server = stub(() => 503);
    const { spawned } = fakeSpawned(server.port as number);
    const ac = new AbortController();
    setTimeout(() => ac.abort(new CoreError("cancelled", "shutting down")), 30);
    const t0 = Date.now();
    const failure = await waitUntilHealthy(spawned, { ...wait(ac.signal), intervalMs: 5000 });
    expect(failure?.error.code).toBe("cancelled");
    expect(Date.now() - t0).toBeLessThan(2000);
  });
});

/** A spawned child that is not a process, whose stderr the test writes lines to. */
function talkingChild(
  port: number,
  dataDir: string,
): { spawned: Spawned; say: (line: string) => Promise<void> } {
  const stderr = new TransformStream<Uint8Array, Uint8Array>();
  const empty = new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const spawned = spawnServer({
    binary: "/nonexistent/llama-server",
    argv: [],
    port,
    apiKey: KEY,
    env: {},
    spawner: () => ({
      pid: 2 ** 30,
      stdout: empty,
      stderr: stderr.readable,
      exited: new Promise(() => {}),
      politeSignal: true,
      writeLine: () => false,
      terminate: () => {},
      kill: () => {},
    }),
    dataDir,
    onLine: () => {},
  });
  if ("error" in spawned) throw spawned.error;
  const writer = stderr.writable.getWriter();
  return { spawned, say: (line) => writer.write(new TextEncoder().encode(`${line}\n`)) };
}

/** Waits with polls backed off to the extreme: only output can cut a wait short. */
const patientWait = () => ({
  startupTimeoutMs: 60_000,
  intervalMs: 60_000,
  signal: new AbortController().signal,
  emit: () => {},
});

describe("waitUntilHealthy, woken by output", () => {
  test("a log line from llama-server polls at once instead of at the next backed-off poll", async () => {
    let ready = false;
    let polls = 0;
    const countPoll = (status: () => number) => {
      polls++;
      return status();
    };
    using server = stub((path) => (path === "/health" ? countPoll(() => (ready ? 200 : 503)) : 200));
    using dir = tmpdir();
    const { spawned, say } = talkingChild(server.port as number, dir.path);
    const waiting = waitUntilHealthy(spawned, patientWait());
    // Polls back off 10, 20, 40… ms: once the 9th is answered and the wait sleeps, the next
    // poll is 2.5 s away, however slow the machine was to get there.
    const asleep = () => polls >= 9 && spawned.nudge !== undefined;
    expect(await waitFor(asleep, { timeoutMs: 10_000, intervalMs: 5 })).toBe(true);
    ready = true;
    const t0 = Date.now();
    await say("srv  llama_server: model loaded");
    expect(await waiting).toBeNull();
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  test("/health turning 200 just after the last line: seen in ms, not at the backed-off poll", async () => {
    let readyAt = Number.POSITIVE_INFINITY;
    let polls = 0;
    const countPoll = (status: () => number) => {
      polls++;
      return status();
    };
    using server = stub((path) =>
      path === "/health" ? countPoll(() => (Date.now() >= readyAt ? 200 : 503)) : 200,
    );
    using dir = tmpdir();
    const { spawned, say } = talkingChild(server.port as number, dir.path);
    const waiting = waitUntilHealthy(spawned, patientWait());
    // The polls have backed off: once the 9th is answered, the next is 2.5 s away.
    const asleep = () => polls >= 9 && spawned.nudge !== undefined;
    expect(await waitFor(asleep, { timeoutMs: 10_000, intervalMs: 5 })).toBe(true);
    // As recorded (startup-stderr.txt): "model loaded", "listening", and /health turns 200
    // a moment later, with nothing more printed.
    const t0 = Date.now();
    readyAt = t0 + 15;
    await say("srv  llama_server: listening on http://127.0.0.1:1");
    expect(await waiting).toBeNull();
    expect(Date.now() - t0).toBeLessThan(1000);
  });
});

describe("waitUntilHealthy, output during a poll", () => {
  // "listening" can come while a /health poll is in flight (answered 503 a moment before the
  // flip): it was missed, the wait slept the backed-off interval, and the ready server waited.
  test("a line that arrives while /health is being asked still cuts the next wait short", async () => {
    let polls = 0;
    let readyAt = Number.POSITIVE_INFINITY;
    let talk: (() => Promise<void>) | undefined;
    using server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        if (new URL(req.url).pathname !== "/health") return new Response("{}");
        polls++;
        const status = Date.now() >= readyAt ? 200 : 503;
        // The 9th poll (the next is 2.5 s away): the line comes, and is read, before its answer.
        if (polls === 9 && talk) await talk();
        return new Response("{}", { status });
      },
    });
    using dir = tmpdir();
    const { spawned, say } = talkingChild(server.port as number, dir.path);
    let t0 = 0;
    talk = async () => {
      const seen = spawned.lastLine;
      t0 = Date.now();
      readyAt = t0 + 15;
      await say("srv  llama_server: listening on http://127.0.0.1:1");
      await waitFor(() => spawned.lastLine !== seen || Date.now() > t0 + 5, {
        timeoutMs: 1000,
        intervalMs: 1,
      });
    };
    expect(await waitUntilHealthy(spawned, patientWait())).toBeNull();
    expect(polls).toBeGreaterThanOrEqual(10);
    expect(Date.now() - t0).toBeLessThan(1000);
  }, 15_000);
});

describe("startupOverdue", () => {
  const s = { t0: 0, port: 8080, tail: new LogTail() };
  test("in time while progress comes and the port answered", () => {
    expect(startupOverdue(s, 5000, 4500, true, 1000)).toBeNull();
  });
  test("the port never answered within the timeout", () => {
    expect(startupOverdue(s, 1001, 1000, false, 1000)?.message).toContain("never answered on port 8080");
  });
  test("no progress for the timeout", () => {
    expect(startupOverdue(s, 3000, 1000, true, 1000)?.message).toContain("made no progress");
  });
  test("progress forever still ends at the hard cap", () => {
    const end = 1000 * HARD_CAP_FACTOR + 1;
    expect(startupOverdue(s, end, end, true, 1000)?.message).toContain(`past ${HARD_CAP_FACTOR}×`);
  });
});

describe("stopChild", () => {
  /** A child that never reports its exit unless told, counting the signals it gets. */
  function stubborn() {
    const exited = Promise.withResolvers<Exit>();
    const calls: string[] = [];
    const child = {
      pid: 2 ** 30,
      stdout: new ReadableStream<Uint8Array>(),
      stderr: new ReadableStream<Uint8Array>(),
      exited: exited.promise,
      politeSignal: true,
      writeLine: () => {
        calls.push("line");
        return true;
      },
      terminate: () => calls.push("term"),
      kill: () => calls.push("kill"),
    };
    return { child, calls, exit: (e: Exit) => exited.resolve(e) };
  }

  test("ends once the child's memory is released, before its exit is reported, and signals nothing more", async () => {
    const c = stubborn();
    const t0 = performance.now();
    await stopChild(c.child, 10_000, true, Promise.resolve(true));
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(c.calls).toEqual(["line"]);
  });

  test("a child whose pipes ended with its memory still held is waited for to exit", async () => {
    const c = stubborn();
    let done = false;
    const stop = stopChild(c.child, 10_000, true, Promise.resolve(false)).then(() => {
      done = true;
    });
    await Bun.sleep(50);
    expect(done).toBe(false);
    c.exit({ code: 0, signal: null });
    await stop;
    expect(c.calls).toEqual(["line"]);
  });

  test("a wrapper's shell reaped, its llama-server killed: the stop ends once the group has ended", async () => {
    const c = stubborn();
    c.exit({ code: null, signal: "SIGTERM" });
    // The group outlives the SIGKILL a few polls (a llama-server still exiting, its memory held).
    let lingering = 3;
    const child = {
      ...c.child,
      groupLingers: () => (c.calls.includes("kill") ? lingering-- > 0 : true),
    };
    await stopChild(child, 0);
    expect(c.calls).toEqual(["kill"]);
    expect(lingering).toBeLessThan(0);
  });
});

describe("addressSpaceGone", () => {
  const live =
    "Name:\tllama-server\nState:\tS (sleeping)\nVmPeak:\t  900 kB\nVmRSS:\t  512 kB\nThreads:\t3\n";
  const zombie = "Name:\tllama-server\nState:\tZ (zombie)\nThreads:\t1\n";
  test("a zombie's status (no VmRSS) has given its memory back; a live one has not", () => {
    expect(addressSpaceGone(zombie)).toBe(true);
    expect(addressSpaceGone(live)).toBe(false);
    expect(addressSpaceGone("")).toBe(false);
  });
  test.if(process.platform === "linux")(
    "this process holds its memory; a pid that is no process tells nothing",
    () => {
      expect(memoryReleased(process.pid)).toBe(false);
      expect(memoryReleased(2 ** 30)).toBe(false);
    },
  );
});

describe("politeStopWait", () => {
  test("no polite stop in the first 100 ms after readiness, unless the server has answered a task", () => {
    expect(politeStopWait(1_000, false, 1_030)).toBe(70);
    expect(politeStopWait(1_000, false, 1_200)).toBe(0);
    // A completion or a slot save answered: its task loop runs, a polite stop is heard at once.
    expect(politeStopWait(1_000, true, 1_030)).toBe(0);
  });
});

/** A spawner that hands out a child that never speaks nor exits, telling `seen` what it was asked. */
function silentSpawner(
  pid: number,
  seen: (req: { argv: readonly string[]; env: Record<string, string> }) => void,
) {
  const empty = () => new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  return (req: { argv: readonly string[]; env: Record<string, string> }) => {
    seen(req);
    return {
      pid,
      stdout: empty(),
      stderr: empty(),
      exited: new Promise<Exit>(() => {}),
      politeSignal: true,
      writeLine: () => false,
      terminate: () => {},
      kill: () => {},
    };
  };
}

describe("the log file's start line", () => {
  test("masks a token written in llama.extra_args (plan/secret-args.ts)", () => {
    using dir = tmpdir();
    let header = "";
    let given: readonly string[] = [];
    const spawned = spawnServer({
      binary: "/nonexistent/llama-server",
      argv: ["--hf-token", "hf_SECRET", "--mcp-servers-json={}", "--temp", "0.2"],
      port: 1,
      apiKey: KEY,
      env: {},
      spawner: silentSpawner(2 ** 30, (req) => {
        given = req.argv;
      }),
      dataDir: dir.path,
      onLine: () => {},
      onSpawn: (_s, h) => {
        header = h;
      },
    });
    if ("error" in spawned) throw spawned.error;
    expect(header).toContain("--hf-token *** --mcp-servers-json=*** --temp 0.2");
    expect(header).not.toContain("SECRET");
    expect(given).toContain("--temp");
  });

  test("an API key of extra_args' own joins the launch's in LLAMA_API_KEY, off the command line (76b)", () => {
    using dir = tmpdir();
    for (const flag of [["--api-key", "mine"], ["--api_key=mine"]]) {
      let seen: { argv: readonly string[]; env: Record<string, string> } = { argv: [], env: {} };
      const spawned = spawnServer({
        binary: "/nonexistent/llama-server",
        argv: ["-m", "/m.gguf", ...flag],
        port: 1,
        apiKey: KEY,
        env: { LLAMA_API_KEY: "inherited" },
        spawner: silentSpawner(2 ** 30, (req) => {
          seen = req;
        }),
        dataDir: dir.path,
        onLine: () => {},
      });
      if ("error" in spawned) throw spawned.error;
      expect(seen.env.LLAMA_API_KEY).toBe(`${KEY},mine`);
      expect(seen.argv.join(" ")).not.toContain("mine");
      // The core asks with its own key.
      expect(spawned.apiKey).toBe(KEY);
    }
  });

  test("a token of extra_args goes in the child's environment, not its command line or the pid record", () => {
    using dir = tmpdir();
    let seen: { argv: readonly string[]; env: Record<string, string> } = { argv: [], env: {} };
    const spawned = spawnServer({
      binary: "/nonexistent/llama-server",
      argv: ["-m", "/m.gguf", "--hf-token", "hf_SECRET", "--model-url", "https://u:pw_SECRET@h/m.gguf"],
      port: 1,
      apiKey: KEY,
      env: { HF_TOKEN: "hf_PARENT" },
      // A live pid: the record is written only for one.
      spawner: silentSpawner(process.pid, (req) => {
        seen = req;
      }),
      dataDir: dir.path,
      onLine: () => {},
    });
    if ("error" in spawned) throw spawned.error;
    expect(seen.argv).toEqual(["-m", "/m.gguf", "--host", "127.0.0.1", "--port", "1"]);
    expect(seen.env.HF_TOKEN).toBe("hf_SECRET");
    expect(seen.env.LLAMA_ARG_MODEL_URL).toBe("https://u:pw_SECRET@h/m.gguf");
    expect(seen.env.LLAMA_API_KEY).toBe(KEY);
    const records = readdirSync(dir.path, { recursive: true }).map(String);
    const onDisk = records.map((f) => {
      try {
        return readFileSync(`${dir.path}/${f}`, "utf8");
      } catch {
        return "";
      }
    });
    expect(onDisk.join("\n")).toContain("/m.gguf");
    expect(onDisk.join("\n")).not.toContain("SECRET");
  });
});

describe("spawnServer refused by the OS", () => {
  test("the core out of open files (EMFILE, as Bun.spawn throws it at the limit) is not binary_missing", () => {
    using dir = tmpdir();
    const spawned = spawnServer({
      binary: "/usr/bin/llama-server",
      argv: [],
      port: 1,
      apiKey: KEY,
      env: {},
      spawner: () => {
        throw Object.assign(new Error("EMFILE: too many open files, socketpair"), { code: "EMFILE" });
      },
      dataDir: dir.path,
      onLine: () => {},
    });
    expect("error" in spawned).toBe(true);
    const { error } = spawned as { error: CoreError };
    expect(error).toMatchObject({ code: "internal_error", data: { problem: "EMFILE" } });
    expect(error.message).toContain("too many files open");
  });
});

/** A spawner whose child writes `text` on its stderr and ends. */
function speakingSpawner(text: string) {
  const silent = silentSpawner(2 ** 30, () => {});
  const stderr = new ReadableStream<Uint8Array>({
    start: (c) => {
      c.enqueue(new TextEncoder().encode(text));
      c.close();
    },
  });
  return (req: Parameters<typeof silent>[0]) => ({ ...silent(req), stderr });
}

/** What a launch of `argv` whose child says `said` on stderr kept: its lines, its tail and its start line. */
async function spoken(dataDir: string, said: string[], argv: string[]) {
  const lines: string[] = [];
  let header = "";
  const spawned = spawnServer({
    binary: "/nonexistent/llama-server",
    argv,
    port: 1,
    apiKey: KEY,
    env: {},
    spawner: speakingSpawner(`${said.join("\n")}\n`),
    dataDir,
    onLine: (line) => lines.push(line),
    onSpawn: (_s, h) => {
      header = h;
    },
  });
  if ("error" in spawned) throw spawned.error;
  await spawned.drained;
  return { lines, tail: spawned.tail.last(), header };
}

describe("llama-server's lines", () => {
  test("never hold a secret of its arguments or the launch's key, as written or as it quotes them", async () => {
    using dir = tmpdir();
    const said = [
      "0.00.001.000 E error: invalid argument: --api-keyy=sk-live-ONE1",
      "0.00.002.000 I download https://me:pw_TWO22@hf.example/m.gguf?token=tk_THREE3 to the cache",
      "0.00.003.000 I api key sk_live_ONE1 hf_FOUR44 and ours " + KEY,
      "0.00.004.000 I mcp server gh: Bearer ghp_FIVE55",
      "0.00.005.000 I n_ctx = 4096, model /m.gguf",
    ];
    const mcp = '{"mcpServers":{"gh":{"url":"https://x","headers":{"Authorization":"Bearer ghp_FIVE55"}}}}';
    const { lines, tail } = await spoken(dir.path, said, [
      ...["-m", "/m.gguf", "--ctx-size", "4096", "--api-keyy=sk_live_ONE1", "--hf-token", "hf_FOUR44"],
      ...["--model-url", "https://me:pw_TWO22@hf.example/m.gguf?token=tk_THREE3", "--mcp-servers-json", mcp],
    ]);
    for (const kept of [lines, tail]) {
      expect(kept).toHaveLength(said.length);
      for (const secret of ["ONE1", "TWO22", "THREE3", "FOUR44", "FIVE55", KEY])
        expect(kept.join("\n")).not.toContain(secret);
      expect(kept[1]).toContain("hf.example/m.gguf");
      expect(kept[4]).toBe(said[4]);
    }
  });
});

describe("llama-server's lines from a hostile GGUF", () => {
  test("the log file, the tail and the start line hold no raw control (a model's general.name)", async () => {
    using dir = tmpdir();
    // llama-server prints a GGUF's metadata as it is (llama_model_loader's `- kv` lines).
    const said = [
      "0.00.010.000 I llama_model_loader: - kv   2:  general.name str = Q\u001b]0;owned\u0007\u009b2J\u001b[2J",
      "\u001b[34m0.00.020.000\u001b[0m \u001b[32mI \u001b[0mprint_info: file type = Q4_K",
    ];
    const { lines, tail, header } = await spoken(dir.path, said, ["-m", "/models/a\u001b[2J\u009b.gguf"]);
    const raw = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
    for (const kept of [lines, tail]) {
      expect(kept).toHaveLength(2);
      expect(kept[0]).not.toMatch(raw);
      expect(kept[0]).toContain("general.name str = Q\\u{1b}]0;owned");
      // --log-colors on: the prefix keeps its colours (log-redact.ts reads through them).
      expect(kept[1]).toBe(said[1] as string);
    }
    expect(header.slice(0, -1)).not.toMatch(raw);
    expect(header).toContain("/models/a\\u{1b}[2J\\u{9b}.gguf");
  });
});

describe("llama-server's lines, with a large --mcp-servers-json", () => {
  test("a start with 100 KiB of MCP definitions spawns and still hides each token", async () => {
    using dir = tmpdir();
    // Every spelling of every secret in one regular expression passed JavaScriptCore's limit
    // ("regular expression too large"), thrown after the spawn: the start failed and its child
    // was left running, its pipes unread and its pid unrecorded.
    const servers: Record<string, unknown> = {};
    for (let i = 0; i < 1100; i++)
      servers[`s${i}`] = { command: "npx", env: { GITHUB_TOKEN: `ghp_${i}_${"x".repeat(36)}` } };
    const mcp = JSON.stringify({ mcpServers: servers });
    // Under the 128 KiB an environment variable may hold (Linux's MAX_ARG_STRLEN), as it goes.
    expect(mcp.length).toBeGreaterThan(100_000);
    expect(mcp.length).toBeLessThan(128 * 1024);
    const lines: string[] = [];
    const spawned = spawnServer({
      binary: "/nonexistent/llama-server",
      argv: ["-m", "/m.gguf", "--mcp-servers-json", mcp],
      port: 1,
      apiKey: KEY,
      env: {},
      spawner: speakingSpawner(`0.00.001.000 I gh: ghp_7_${"x".repeat(36)} and ${KEY}, n_ctx = 4096\n`),
      dataDir: dir.path,
      onLine: (line) => lines.push(line),
    });
    if ("error" in spawned) throw spawned.error;
    await spawned.drained;
    expect(lines).toEqual(["0.00.001.000 I gh: [redacted] and [redacted], n_ctx = 4096"]);
  });
});
