import { afterEach, describe, expect, test } from "bun:test";
import { watchedCompletion } from "../../src/agent/watched-completion.ts";
import { ConnectionRefused, LlmError } from "../../src/llama/errors.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { DEATH_GRACE_MS, deathGraceMs } from "../../src/runtime/death-reason.ts";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";
import { Launch } from "../../src/runtime/launch.ts";
import { IDENTIFY_TIMEOUT_MS } from "../../src/runtime/rpc-watch.ts";
import { EVENTLESS_CAP } from "../../src/runtime/watchdog.ts";
import { deadLease } from "../fixtures/dead-lease.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";

// Issue 19 item 3: a request refused by a llama-server that died a moment ago reached no server,
// so it is sent again, once, on the lease moved to the restarted one; anything else that went
// wrong with the server is reported and thrown as before.

const never = () => new AbortController().signal;
const REQUEST = { messages: [{ role: "user", content: "hi" }] };

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});

/** The completion with nobody listening to its deltas. */
const complete = (lease: LlamaLease) =>
  watchedCompletion(lease, REQUEST, { signal: never(), onDelta: () => {} });

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected a failure");
}

describe("watchedCompletion and a server that is gone", () => {
  test("refused: the lease moves to the restarted server and the request is sent there, once", async () => {
    const live = new LlamaStandIn().script({ content: "back again" });
    standIn = live;
    const { lease, calls } = await deadLease(() => ({ baseUrl: live.baseUrl, apiKey: live.apiKey }));
    let sent = 0;
    const deltas: string[] = [];
    const reply = await watchedCompletion(lease, REQUEST, {
      signal: never(),
      onDelta: (d) => deltas.push(d),
      onSent: () => sent++,
    });
    expect(reply.content).toBe("back again");
    expect(deltas.join("")).toBe("back again");
    expect(calls).toEqual({ reconnects: 1, failures: [] });
    // onSent runs for a request that went out: the refused one never did (llama/stream-socket.ts).
    expect(sent).toBe(1);
    expect(live.requests).toHaveLength(1);
    // An answer only its task loop gives: a polite stop is heard at once now (launch-steps.ts politeStopWait).
    expect(lease.launch.servedTask).toBe(true);
  });

  test("refused again by the restarted one: reported and thrown, no third try", async () => {
    const { lease, calls } = await deadLease(() => ({ baseUrl: lease.baseUrl, apiKey: "k" }));
    const err = await failure(complete(lease));
    expect(err).toBeInstanceOf(ConnectionRefused);
    expect(calls.reconnects).toBe(1);
    expect(calls.failures).toHaveLength(1);
    expect(lease.launch.servedTask).toBe(false);
  });

  test("a lease that cannot reconnect (a stand-in provider's) reports and throws as before", async () => {
    const { lease, calls } = await deadLease();
    const err = await failure(complete(lease));
    expect(err).toBeInstanceOf(LlmError);
    expect((err as LlmError).kind).toBe("connection_lost");
    expect(calls.failures).toHaveLength(1);
  });

  test("cut mid-reply (the request reached it): reported and thrown, never sent again", async () => {
    const live = new LlamaStandIn().script({ content: "one two three four", crash_after_chunks: 2 });
    standIn = live;
    const calls = { reconnects: 0, failures: 0 };
    const lease: LlamaLease = {
      baseUrl: live.baseUrl,
      apiKey: live.apiKey,
      died: never(),
      launch: new Launch({ baseUrl: live.baseUrl, apiKey: live.apiKey, slots: 1 }),
      requestTimeoutMs: 5000,
      release: () => {},
      reportFailure: () => calls.failures++,
      reconnect: async () => {
        calls.reconnects++;
      },
    };
    const err = await failure(complete(lease));
    expect(err).toBeInstanceOf(LlmError);
    expect(err).not.toBeInstanceOf(ConnectionRefused);
    expect(calls).toEqual({ reconnects: 0, failures: 1 });
    expect(live.requests).toHaveLength(1);
  });
});

// The real RPC test (docs/distributed.md): llama-server aborting on a lost worker closes its
// sockets as it exits, and the reset reached the chat's request before the exit did 1 run in 3
// once the backtrace's ~0.9 s was gone; the error must still name the worker.
describe("watchedCompletion and a connection cut by the server's death", () => {
  const cutLease = (died: AbortSignal) => {
    const live = new LlamaStandIn().script({ content: "one two three four", crash_after_chunks: 2 });
    standIn = live;
    const failures: string[] = [];
    const lease: LlamaLease = {
      baseUrl: live.baseUrl,
      apiKey: live.apiKey,
      died,
      launch: new Launch({ baseUrl: live.baseUrl, apiKey: live.apiKey, slots: 1 }),
      requestTimeoutMs: 5000,
      release: () => {},
      reportFailure: (reason) => void failures.push(reason),
    };
    return { lease, failures };
  };

  test("the death heard just after the reset: its reason is thrown, not the reset", async () => {
    const died = new AbortController();
    const { lease, failures } = cutLease(died.signal);
    const named = new CoreError(
      "internal_error",
      "llama-server aborted: RPC worker 10.0.0.2:50052 stopped answering",
    );
    const pending = failure(complete(lease));
    await Bun.sleep(100);
    died.abort(named);
    expect(await pending).toBe(named);
    // The supervisor heard the death itself: no second report that would name the reset.
    expect(failures).toEqual([]);
  });

  test("no death within the grace: the lost connection is reported and thrown", async () => {
    const { lease, failures } = cutLease(never());
    const started = performance.now();
    const err = await failure(complete(lease));
    expect((err as LlmError).kind).toBe("connection_lost");
    expect(failures).toHaveLength(1);
    expect(performance.now() - started).toBeGreaterThanOrEqual(DEATH_GRACE_MS - 5);
  });

  test("cancel during the grace ends the wait at once, as cancelled", async () => {
    const { lease } = cutLease(never());
    // With a worker the grace is DEATH_GRACE_MS + IDENTIFY_TIMEOUT_MS (1.5 s): a loaded box's late
    // sleep still cancels inside it, and an answer that waited the grace out is far past the bound.
    const withWorker = {
      ...lease,
      launch: new Launch({
        baseUrl: lease.baseUrl,
        apiKey: lease.apiKey,
        slots: 1,
        rpcWorkers: ["10.0.0.2:50052"],
      }),
    };
    expect(deathGraceMs(withWorker.launch)).toBe(DEATH_GRACE_MS + IDENTIFY_TIMEOUT_MS);
    const cancel = new AbortController();
    const pending = failure(
      watchedCompletion(withWorker, REQUEST, { signal: cancel.signal, onDelta: () => {} }),
    );
    await Bun.sleep(150);
    const t0 = performance.now();
    cancel.abort(new CoreError("cancelled", "the request was cancelled"));
    const err = await pending;
    expect((err as CoreError).code).toBe("cancelled");
    expect(performance.now() - t0).toBeLessThan(IDENTIFY_TIMEOUT_MS);
  });
});

// A byte is not progress: llama-server sends an SSE ping (`:\n\n`) every 30 s of silence
// (recording 67) from its HTTP thread, so a server whose task loop is wedged pings forever, and
// so can a hostile one. Progress is an event: a token, or while the prompt is read a batch's
// progress event (return_progress, 98b); before the first token a ping keeps the request alive,
// for at most EVENTLESS_CAP × request_timeout_s after the last event (docs/agent.md, "Progress").
describe("watchedCompletion and a server that only pings", () => {
  const wedgedLease = (live: LlamaStandIn, requestTimeoutMs: number) => {
    const failures: string[] = [];
    const lease: LlamaLease = {
      baseUrl: live.baseUrl,
      apiKey: live.apiKey,
      died: never(),
      launch: new Launch({ baseUrl: live.baseUrl, apiKey: live.apiKey, slots: 1 }),
      requestTimeoutMs,
      release: () => {},
      reportFailure: (reason) => void failures.push(reason),
    };
    return { lease, failures };
  };

  test("pings after the first token are not progress: the wedge is seen after request_timeout_s", async () => {
    standIn = new LlamaStandIn().script({ content: "one two", hang: true, ping_ms: 30 });
    const { lease, failures } = wedgedLease(standIn, 300);
    const cancel = new AbortController();
    const started = performance.now();
    const outcome = await Promise.race([
      failure(watchedCompletion(lease, REQUEST, { signal: cancel.signal, onDelta: () => {} })),
      Bun.sleep(3000).then(() => "still waiting"),
    ]);
    cancel.abort();
    expect(outcome).not.toBe("still waiting");
    expect((outcome as Error).message).toContain("no progress for");
    expect(failures).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  /** The request against `standIn`, or "still waiting" after `ms`; then cancelled. */
  const outcomeWithin = async (lease: LlamaLease, ms: number) => {
    const cancel = new AbortController();
    const outcome = await Promise.race([
      failure(watchedCompletion(lease, REQUEST, { signal: cancel.signal, onDelta: () => {} })),
      Bun.sleep(ms).then(() => "still waiting"),
    ]);
    cancel.abort();
    return outcome;
  };

  // A GPU that stopped answering in a batch of the prompt: the HTTP thread pings on, the
  // progress events stop. Before, any byte before the first token was progress: forever.
  test("wedged mid-prompt (progress events, then only pings): a wedge once no event came for the cap since the last, not before", async () => {
    // Events as the slot starts and after two batches of 300 ms each; then the loop is stuck.
    const script = { content: "a b", prompt_batches: 4, batch_ms: 300, wedge_after_progress: 3, ping_ms: 30 };
    standIn = new LlamaStandIn().script(script);
    // 400 ms between the 30 ms pings: a loaded box's stall of 150 ms read as a wedge before them.
    const { lease, failures } = wedgedLease(standIn, 400);
    const started = performance.now();
    const outcome = await outcomeWithin(lease, 12_000);
    expect(outcome).not.toBe("still waiting");
    expect((outcome as Error).message).toContain(
      `only its keep-alive pings (${EVENTLESS_CAP} × llama.request_timeout_s)`,
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(2 * 300 + EVENTLESS_CAP * 400 - 5);
    expect(failures).toHaveLength(1);
    // The request asked for the events that show the read moving.
    expect(standIn.requests[0]?.body).toMatchObject({ return_progress: true });
  }, 20_000);

  // No event at all, pings alone (a build older than return_progress, or a hostile server):
  // alive up to the cap, then a wedge.
  test("pings alone before any event: waited on up to the cap, then a wedge", async () => {
    standIn = new LlamaStandIn().script({ content: "a b", wedge_after_progress: 0, ping_ms: 30 });
    // As above: 400 ms, so a loaded box's stall between pings is not read as the wedge.
    const { lease, failures } = wedgedLease(standIn, 400);
    const started = performance.now();
    const outcome = await outcomeWithin(lease, 12_000);
    expect((outcome as Error).message).toContain("only its keep-alive pings");
    expect(performance.now() - started).toBeGreaterThanOrEqual(EVENTLESS_CAP * 400 - 5);
    expect(failures).toHaveLength(1);
  }, 20_000);

  // A slow machine: a batch of the prompt (or an image's encoding) outlasts request_timeout_s,
  // with only pings meanwhile. Within the cap it is waited on, progress events or not.
  test("a batch of the prompt slower than request_timeout_s, pings meanwhile: the reply comes", async () => {
    standIn = new LlamaStandIn().script({ content: "a b", prompt_batches: 2, batch_ms: 500, ping_ms: 30 });
    const { lease, failures } = wedgedLease(standIn, 150);
    const reply = await complete(lease);
    expect(reply.content).toBe("a b");
    expect(failures).toEqual([]);
  });

  test("no byte at all for request_timeout_s (the slot never started) is a wedge then, as before", async () => {
    standIn = new LlamaStandIn().script({ hang: true });
    const { lease, failures } = wedgedLease(standIn, 150);
    const outcome = await outcomeWithin(lease, 3000);
    expect((outcome as Error).message).toContain("no progress for 0 s (llama.request_timeout_s)");
    expect(failures).toHaveLength(1);
  });

  test("events slower than the limit in all, each within it, finish", async () => {
    // 100 ms apart, 500 ms within the limit each: a loaded box cannot make one late.
    standIn = new LlamaStandIn().script({ content: "a b c d e f g h", chunk_delay_ms: 100 });
    const { lease, failures } = wedgedLease(standIn, 600);
    const reply = await complete(lease);
    expect(reply.content).toBe("a b c d e f g h");
    expect(failures).toEqual([]);
  });
});
