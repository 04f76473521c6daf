import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type CoreError, CoreError as CoreErrorClass } from "../../src/protocol/errors.ts";
import { rpcWorkerSnapshot, WorkerBook } from "../../src/rpc/workers.ts";
import { classifyStartExit } from "../../src/runtime/exit-reason.ts";
import { RpcWatch } from "../../src/runtime/rpc-watch.ts";
import { TRANSCRIPTS } from "../fixtures/recordings-dir.ts";

const lines = (file: string) => readFileSync(join(TRANSCRIPTS, file), "utf8").split("\n");

function watch(up: Record<string, boolean>) {
  const book = new WorkerBook();
  const lost: CoreError[] = [];
  const w = new RpcWatch({ onLost: (e) => lost.push(e), book, accepts: async (e) => up[e] ?? false });
  return { w, book, lost };
}

describe("RpcWatch on the recorded logs", () => {
  test("83: the RPC abort mid-run names the worker that no longer accepts connections", async () => {
    const { w, book, lost } = watch({ "127.0.0.1:50152": true, "127.0.0.1:50153": false });
    w.begin(["127.0.0.1:50152", "127.0.0.1:50153"]);
    for (const l of lines("83-rpc-worker-dies.log")) w.line(l);
    await Bun.sleep(10);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.message).toContain("RPC worker 127.0.0.1:50153 stopped answering");
    expect(lost[0]!.data).toMatchObject({ rpc_workers_lost: ["127.0.0.1:50153"] });
    expect(rpcWorkerSnapshot(["127.0.0.1:50152", "127.0.0.1:50153"], book).map((s) => s.state)).toEqual([
      "in_use",
      "lost",
    ]);
    // The exit that follows carries the same error.
    expect(w.crashError("killed by SIGABRT", { exit_code: null }, [])?.message).toBe(lost[0]!.message);
  });

  test("83: an exit seen before the connections were tried still says it was an RPC worker, naming the candidates", () => {
    const { w } = watch({});
    w.begin(["127.0.0.1:50152", "127.0.0.1:50153"]);
    const err = w.crashError("killed by SIGABRT", { signal: "SIGABRT" }, lines("83-rpc-worker-dies.log"));
    expect(err?.message).toContain(
      "one of its RPC workers (127.0.0.1:50152, 127.0.0.1:50153) stopped answering",
    );
    expect(err?.data).toMatchObject({ signal: "SIGABRT" });
  });

  // Without the backtrace (GGML_NO_BACKTRACE) the real build exits ~15 ms after its abort line,
  // before the workers' connections are tried: the crash's error waits for the finding.
  test("83: an exit while the lost worker is being found: named() waits for the finding", async () => {
    const book = new WorkerBook();
    let answer: (up: boolean) => void = () => {};
    const w = new RpcWatch({
      onLost: () => {},
      book,
      accepts: (e) => (e.endsWith(":50153") ? new Promise((r) => (answer = r)) : Promise.resolve(true)),
    });
    w.begin(["127.0.0.1:50152", "127.0.0.1:50153"]);
    for (const l of lines("83-rpc-worker-dies.log")) w.line(l);
    const provisional = w.crashError("killed by SIGABRT", { signal: "SIGABRT" }, []);
    expect(provisional?.message).toContain("one of its RPC workers");
    const named = w.named(provisional!);
    await Bun.sleep(20);
    answer(false);
    const err = await named;
    expect(err.message).toContain("RPC worker 127.0.0.1:50153 stopped answering");
    expect(err.data).toMatchObject({ signal: "SIGABRT", rpc_workers_lost: ["127.0.0.1:50153"] });
  });

  test("named(): nothing being found, the error is returned as it is", async () => {
    const { w } = watch({});
    w.begin(["a:1"]);
    const plain = new CoreErrorClass("internal_error", "llama-server crashed (exit code 1)");
    expect(await w.named(plain)).toBe(plain);
  });

  test("a crash without the signature is not an RPC error", () => {
    const { w } = watch({});
    w.begin(["a:1"]);
    expect(w.crashError("killed by SIGKILL", {}, ["whatever"])).toBeNull();
  });

  test("82: a worker skipped at start-up (b10587) fails the start, naming it", () => {
    const { w, book } = watch({});
    w.begin(["127.0.0.1:1"]);
    const err = w.afterReady(lines("82-rpc-unreachable.log"));
    expect(err?.message).toContain(
      "llama-server started without RPC worker 127.0.0.1:1 (it could not connect)",
    );
    expect(rpcWorkerSnapshot(["127.0.0.1:1"], book)[0]!.state).toBe("lost");
    // A worker that is not this launch's is none of its business.
    w.begin(["127.0.0.1:2"]);
    expect(w.afterReady(lines("82-rpc-unreachable.log"))).toBeNull();
  });

  test("a skipped worker is named even when the start's log pushed its line out of the tail", () => {
    // With -v in llama.extra_args llama-server prints a line per tensor and layer while it
    // loads: hundreds after the worker's `Failed to connect`, past the launch tail's 400.
    const { w } = watch({});
    w.begin(["127.0.0.1:1"]);
    const log = [
      "0.00.005.366 E Failed to connect to 127.0.0.1:1",
      ...Array.from(
        { length: 600 },
        (_, i) => `0.00.090.000 D load_tensors: layer ${i} assigned to device CPU`,
      ),
      "0.00.139.035 I srv  llama_server: listening on http://127.0.0.1:50193",
    ];
    for (const l of log) w.line(l);
    expect(w.afterReady(log.slice(-400))?.message).toContain(
      "llama-server started without RPC worker 127.0.0.1:1 (it could not connect)",
    );
    // The next launch starts from nothing.
    w.begin(["127.0.0.1:1"]);
    expect(w.afterReady(log.slice(-400))).toBeNull();
  });

  test("a finding that arrives after the next launch began is dropped", async () => {
    const { w, lost } = watch({});
    w.begin(["a:1"]);
    w.line(
      "llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:509: Remote RPC server crashed or returned malformed response",
    );
    w.begin(["a:1"]);
    await Bun.sleep(10);
    expect(lost).toEqual([]);
  });

  test("a version llama-server refuses is remembered for the worker (either build's lines)", () => {
    const { w, book } = watch({});
    w.begin(["a:1", "b:1"]);
    w.line("0.00.005 E RPC server version mismatch: 4.0.0");
    w.line("/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:550: RPC handshake failed for a:1");
    expect(book.refusal("a:1")).toBe("4.0.0");
    w.begin(["a:1", "b:1"]);
    w.line("0.00.005 E RPC server version mismatch: 7.0.0");
    w.line("0.00.006 E Failed to connect to b:1");
    expect(book.refusal("b:1")).toBe("7.0.0");
  });

  // b10587 logs the mismatch, then the same `Failed to connect` an unreachable worker gets: the
  // version belongs to the next such line only, not to every worker skipped after it.
  test("a refused version names only the worker it was logged for, not one unreachable after it", () => {
    const { w, book } = watch({});
    w.begin(["a:1", "b:1"]);
    const tail = [
      "0.00.005 E RPC server version mismatch: 4.0.0",
      "0.00.006 E Failed to connect to a:1",
      "0.00.007 E Failed to connect to b:1",
    ];
    for (const l of tail) w.line(l);
    expect(book.refusal("a:1")).toBe("4.0.0");
    expect(book.refusal("b:1")).toBeUndefined();
    const err = w.afterReady(tail);
    expect(err?.message).toContain("a:1 (it speaks RPC protocol v4.0.0, which this llama-server refuses)");
    expect(err?.message).toContain("b:1 (it could not connect)");
  });

  test("with no workers, lines are not even looked at", () => {
    const { w, lost } = watch({});
    w.begin([]);
    w.line("Remote RPC server crashed or returned malformed response");
    expect(lost).toEqual([]);
    expect(
      w.crashError("x", {}, ["Remote RPC server crashed or returned malformed response"]),
    ).not.toBeNull();
  });
});

describe("classifyStartExit: RPC workers at start-up", () => {
  test("83's abort during a start is an RPC worker that stopped answering", () => {
    expect(classifyStartExit(lines("83-rpc-worker-dies.log"), null, "SIGABRT").message).toContain(
      "an RPC worker stopped answering while llama-server loaded the model",
    );
  });

  test("newer builds abort on an unreachable worker or a refused version: each is named", () => {
    const connect = classifyStartExit(
      ["/tmp/llama.cpp/ggml/src/ggml-rpc/ggml-rpc.cpp:547: Failed to connect to 127.0.0.1:1"],
      null,
      "SIGABRT",
    );
    expect(connect).toMatchObject({ code: "internal_error", retryPort: false });
    expect(connect.message).toContain("could not connect to RPC worker 127.0.0.1:1 at start-up");
    const version = classifyStartExit(
      ["E RPC server version mismatch: 4.0.0", "ggml-rpc.cpp:550: RPC handshake failed for 10.0.0.2:50052"],
      null,
      "SIGABRT",
    );
    expect(version.message).toContain("RPC worker 10.0.0.2:50052 speaks another RPC protocol version");
  });

  test("someone else's connection failure (a download by URL) is not an RPC worker", () => {
    const r = classifyStartExit(
      ["curl: (7) Failed to connect to huggingface.co port 443 after 3 ms"],
      1,
      null,
    );
    expect(r.message).not.toContain("RPC worker");
  });

  test("a missing model file still wins over a skipped worker", () => {
    const r = classifyStartExit(
      lines("82-rpc-unreachable.log")
        .slice(0, 3)
        .concat(["E gguf_init_from_file: failed to open GGUF file 'm' (No such file or directory)"]),
      1,
      null,
    );
    expect(r.code).toBe("model_missing");
  });
});

// A frozen worker (SIGSTOP, a machine asleep) keeps its connection open and never answers:
// llama-server waits on it without a word, so a start or a request that stalls names the
// workers it had (seen with the real llama-server and ggml-rpc-server).
describe("a stall while llama-server has RPC workers", () => {
  test("a start that made no progress names the workers of the launch", async () => {
    const { startupOverdue } = await import("../../src/runtime/launch-steps.ts");
    const { w } = watch({});
    const late = startupOverdue({ t0: 0, port: 1, tail: { last: () => [] } as never }, 5000, 0, true, 1000)!;
    w.begin(["127.0.0.1:50152", "127.0.0.1:50153"]);
    const named = await w.startFailure(late);
    expect(named.message).toStartWith(late.message);
    expect(named.message).toContain("RPC workers 127.0.0.1:50152, 127.0.0.1:50153");
    expect(named.data).toMatchObject({ rpc_workers: ["127.0.0.1:50152", "127.0.0.1:50153"] });
    w.begin([]);
    expect(await w.startFailure(late)).toBe(late);
  });

  test("another start failure passes unchanged", async () => {
    const { w } = watch({});
    w.begin(["127.0.0.1:50152"]);
    const other = classifyStartExit(["failed to open GGUF file"], 1, null);
    const err = { code: other.code, message: other.message } as CoreError;
    expect(await w.startFailure(err)).toBe(err);
  });
});

// A worker killed while llama-server loads onto it: the real b-build crashed (SIGSEGV) with no
// RPC line in its log, and the start's error named no worker.
describe("a start that crashed while llama-server had RPC workers", () => {
  const crash = () => {
    const why = classifyStartExit(["load_model: loading model"], null, "SIGSEGV");
    return new CoreErrorClass(why.code, why.message, { exit_code: null, signal: "SIGSEGV" });
  };

  test("names the worker that no longer accepts connections, and the book has it lost", async () => {
    const { w, book } = watch({ "127.0.0.1:50152": true, "127.0.0.1:50153": false });
    w.begin(["127.0.0.1:50152", "127.0.0.1:50153"]);
    const err = await w.startFailure(crash());
    expect(err.message).toStartWith(crash().message);
    expect(err.message).toContain(
      "RPC worker 127.0.0.1:50153 stopped accepting connections during the start",
    );
    expect(err.data).toMatchObject({ signal: "SIGSEGV", rpc_workers_lost: ["127.0.0.1:50153"] });
    expect(rpcWorkerSnapshot(["127.0.0.1:50153"], book)[0]!.state).toBe("lost");
  });

  // A worker whose name did not resolve just then (a DNS hiccup) was counted lost, and the next
  // start planned without it though it was alive.
  test("a worker that could not be told (its name did not resolve) is not counted lost", async () => {
    const book = new WorkerBook();
    const w = new RpcWatch({
      onLost: () => {},
      book,
      accepts: async (e) => (e.startsWith("gone") ? false : undefined),
    });
    w.begin(["flaky.lan:50052", "gone.lan:50052"]);
    const err = await w.startFailure(crash());
    expect(err.data).toMatchObject({ rpc_workers_lost: ["gone.lan:50052"] });
    expect(rpcWorkerSnapshot(["flaky.lan:50052", "gone.lan:50052"], book).map((s) => s.state)).toEqual([
      "in_use",
      "lost",
    ]);
  });

  test("all workers still there, or none: the error as it was", async () => {
    const { w } = watch({ "127.0.0.1:50152": true });
    w.begin(["127.0.0.1:50152"]);
    const err = crash();
    expect(await w.startFailure(err)).toBe(err);
    w.begin([]);
    expect(await w.startFailure(err)).toBe(err);
  });
});
