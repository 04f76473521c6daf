import { describe, expect, test } from "bun:test";
import type { CoreError } from "../../src/protocol/errors.ts";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";
import { Launch } from "../../src/runtime/launch.ts";
import { EVENTLESS_CAP, watchDeadline, watchProgress } from "../../src/runtime/watchdog.ts";

// The watchdog keeps progress as a timestamp and one timer that re-arms for the rest
// (docs/performance.md, "Where a streamed piece's CPU goes"): what it promises must not move.
function lease(requestTimeoutMs: number): LlamaLease & { failures: string[] } {
  const failures: string[] = [];
  return {
    baseUrl: "http://127.0.0.1:1",
    apiKey: "k",
    died: new AbortController().signal,
    launch: new Launch({ baseUrl: "http://127.0.0.1:1", apiKey: "k", slots: 1 }),
    requestTimeoutMs,
    release() {},
    reportFailure: (reason) => void failures.push(reason),
    failures,
  };
}

describe("watchProgress", () => {
  test("no progress for the limit aborts with the watchdog's reason and reports the wedge", async () => {
    const l = lease(80);
    const watch = watchProgress(l, new AbortController().signal);
    const started = performance.now();
    await new Promise((r) => watch.signal.addEventListener("abort", r));
    expect(performance.now() - started).toBeGreaterThanOrEqual(75);
    expect((watch.signal.reason as Error).message).toBe(
      "llama-server stopped responding: no progress for 0 s (llama.request_timeout_s)",
    );
    expect(l.failures).toHaveLength(1);
    watch.dispose();
  });

  test("a wedge on a server with RPC workers names them: a frozen worker stalls it without a word", async () => {
    const l = lease(30);
    const launch = new Launch({
      baseUrl: "http://127.0.0.1:1",
      apiKey: "k",
      slots: 1,
      rpcWorkers: ["box:50052"],
    });
    const watch = watchProgress({ ...l, launch }, new AbortController().signal);
    await new Promise((r) => watch.signal.addEventListener("abort", r));
    expect((watch.signal.reason as Error).message).toStartWith(
      "llama-server stopped responding: no progress for 0 s (llama.request_timeout_s); it was using RPC worker box:50052",
    );
    watch.dispose();
  });

  // A limit well over the touches' spacing: a loaded machine's 30 ms sleep may take 100.
  test("progress more often than the limit keeps it alive; the limit counts from the last touch", async () => {
    const l = lease(400);
    const watch = watchProgress(l, new AbortController().signal);
    for (let i = 0; i < 10; i++) {
      await Bun.sleep(30);
      watch.touch();
    }
    expect(watch.signal.aborted).toBe(false);
    const lastTouch = performance.now();
    await new Promise((r) => watch.signal.addEventListener("abort", r));
    expect(performance.now() - lastTouch).toBeGreaterThanOrEqual(395);
    expect(l.failures).toHaveLength(1);
    watch.dispose();
  });

  // Pings before the first token (alive) keep a request up to the cap after its last event
  // (touch): a batch of the prompt may outlast the limit, a wedged task loop pings forever.
  test("bytes without an event keep it alive, for EVENTLESS_CAP × the limit after the last event", async () => {
    const l = lease(300);
    const watch = watchProgress(l, new AbortController().signal);
    const pings = setInterval(watch.alive, 30);
    await Bun.sleep(600);
    expect(watch.signal.aborted).toBe(false);
    watch.touch();
    const lastEvent = performance.now();
    await new Promise((r) => watch.signal.addEventListener("abort", r));
    clearInterval(pings);
    expect(performance.now() - lastEvent).toBeGreaterThanOrEqual(EVENTLESS_CAP * 300 - 5);
    expect((watch.signal.reason as Error).message).toBe(
      `llama-server stopped responding: no progress for 3 s, only its keep-alive pings (${EVENTLESS_CAP} × llama.request_timeout_s)`,
    );
    expect(l.failures).toEqual([
      `no progress for 3 s, only its keep-alive pings (${EVENTLESS_CAP} × llama.request_timeout_s)`,
    ]);
    watch.dispose();
  });

  test("disposed, it never fires; the chat's cancel passes through", async () => {
    const l = lease(30);
    const cancel = new AbortController();
    const watch = watchProgress(l, cancel.signal);
    watch.dispose();
    await Bun.sleep(80);
    expect(watch.signal.aborted).toBe(false);
    expect(l.failures).toEqual([]);
    cancel.abort(new Error("cancelled"));
    expect((watch.signal.reason as Error).message).toBe("cancelled");
  });
});

describe("watchDeadline", () => {
  test("no answer by the deadline aborts as a wedge (server_failed) and reports it; disposed, it never fires; a cancel passes through", async () => {
    const l = lease(120_000);
    const watch = watchDeadline(l, new AbortController().signal, 20, "an embedding request of 2 inputs");
    await new Promise((r) => watch.signal.addEventListener("abort", r));
    const err = watch.signal.reason as CoreError;
    expect(err.code).toBe("internal_error");
    expect(err.message).toBe(
      "llama-server stopped responding: no answer in 0 s to an embedding request of 2 inputs; it is restarted",
    );
    expect(err.data).toEqual({ reason: "server_failed" });
    expect(l.failures).toEqual(["no answer in 0 s to an embedding request of 2 inputs"]);
    watch.dispose();

    const quiet = lease(120_000);
    const done = watchDeadline(quiet, new AbortController().signal, 5, "x");
    done.dispose();
    await Bun.sleep(20);
    expect(done.signal.aborted).toBe(false);
    expect(quiet.failures).toEqual([]);

    const cancel = new AbortController();
    const cancelled = watchDeadline(quiet, cancel.signal, 60_000, "x");
    cancel.abort(new Error("cancelled"));
    expect((cancelled.signal.reason as Error).message).toBe("cancelled");
    cancelled.dispose();
    expect(quiet.failures).toEqual([]);
  });

  test("a deadline past what a timer holds (2^31 - 1 ms) waits, not fires at once", async () => {
    const l = lease(120_000);
    const watch = watchDeadline(l, new AbortController().signal, 2 ** 31 + 5_000, "a huge embedding request");
    await Bun.sleep(30);
    expect(watch.signal.aborted).toBe(false);
    expect(l.failures).toEqual([]);
    watch.dispose();
  });
});
