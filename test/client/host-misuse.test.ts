import { afterEach, describe, expect, jest, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// What a host plausibly gets wrong, against an in-process core (fake-child.ts).
afterEach(killFakes);

/** A client on a FakeChild that answers every request but chat (left running) with `{ status: "ok" }`. */
async function start(extra: { onRequest?: (method: string) => void } = {}) {
  const child = new FakeChild((req, c) => {
    extra.onRequest?.(req.method);
    if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: false } });
    else if (req.method !== "chat") c.send({ id: req.id, type: "result", result: { status: "ok" } });
  });
  const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
  return { client, child };
}

describe("a host's misuse", () => {
  test("a signal aborted before the call sends nothing and rejects with cancelled", async () => {
    // It was written to the core all the same: the delete ran, the chat started.
    const { client, child } = await start();
    const controller = new AbortController();
    controller.abort();
    const { signal } = controller;
    const calls = [
      client.sessions.delete({ session_id: "s1" }, { signal }),
      client.chat({ input: "hi" }, { signal }).result,
      client.warmup({}, { signal }).result,
      client.embed({ input: "x" }, { signal }),
    ];
    for (const call of calls) {
      const err = await rejection(call);
      expect(err.code).toBe("cancelled");
      expect(err.message).toContain("before it was sent");
    }
    expect(await client.ping()).toEqual({ status: "ok" });
    expect(child.requests.map((r) => r.method)).toEqual(["ping"]);
  });

  test("an abort ends the wait even when the core never answers its cancel", async () => {
    // A core that reads its input but is stuck answers neither the chat nor the cancel; the
    // abort's cancel timed out into a log line and the chat stayed pending for good.
    const child = new FakeChild(() => {});
    const warned: string[] = [];
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        // A config named: a bare binary with none is warned of (core-launch.ts), not the point here.
        config: "config.yaml",
        requestTimeoutMs: 200,
        logger: { warn: (m) => warned.push(m) },
      }),
    );
    const controller = new AbortController();
    const chat = client.chat({ input: "hi" }, { signal: controller.signal });
    // Part of the test: the chat is written before the abort.
    expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
    controller.abort();
    const err = await rejection(chat.result);
    expect(err.code).toBe("cancelled");
    expect(err.message).toContain("did not confirm its cancel");
    expect(child.requests.map((r) => r.method)).toEqual(["chat", "cancel"]);
    expect(warned).toEqual([`cancel of ${chat.id} failed: cancel got no answer within 200 ms`]);
  });

  test("chat.cancel() and client.cancel(id) end a chat whose core never answers the cancel", async () => {
    // The abort's path ended such a chat; cancel() itself rejected with timeout and left the
    // chat (no stream time limit by default) pending for good.
    const child = new FakeChild(() => {});
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: 200 }),
    );
    const chats = [client.chat({ input: "a" }), client.chat({ input: "b" })];
    // Part of the test: both chats are written before the cancels.
    expect(await waitFor(() => child.requests.length === 2, { intervalMs: 2 })).toBe(true);
    // Their failures are taken at once: the two time-outs may fire a turn of the loop apart, and a
    // rejection left without a handler across one is reported (and ends the test) by the runner.
    // The stream's cancel() never rejects (a host calls it without awaiting, as it aborts a fetch);
    // client.cancel(id) is a call like any other and rejects.
    const streamCancel = chats[0]!.cancel();
    const callCancel = rejection(client.cancel(chats[1]!.id));
    for (const chat of chats) {
      const err = await rejection(chat.result);
      expect(err.code).toBe("cancelled");
      expect(err.message).toContain("did not confirm its cancel");
    }
    expect(await streamCancel).toBe(false);
    expect((await callCancel).code).toBe("timeout");
  });

  test("client.cancel() without an id ends the only chat when the core confirms but never ends it", async () => {
    // chat.cancel() and client.cancel(id) gave up on such a chat after the cancel's time limit;
    // the id-less form, the only active chat's, left it (no stream time limit) pending for good.
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: true } });
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const chat = client.chat({ input: "a" });
    expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
    expect(await client.cancel(undefined, { timeoutMs: 50 })).toBe(true);
    const err = await rejection(chat.result);
    expect(err.code).toBe("cancelled");
    expect(err.message).toContain("did not end it within 50 ms");
    expect(child.requests[1]?.params).toEqual({ request_id: chat.id });
  });

  test("client.cancel() without an id skips a chat already cancelled, as the core does, and ends the other", async () => {
    // The core's implicit cancel passes over a chat it is already cancelling; the client counted
    // it, saw two, and sent the id-less form: the other chat, cancelled but never ended, hung.
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: true } });
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const winding = client.chat({ input: "a" });
    const other = client.chat({ input: "b" });
    expect(await waitFor(() => child.requests.length === 2, { intervalMs: 2 })).toBe(true);
    expect(await winding.cancel()).toBe(true);
    expect(await client.cancel(undefined, { timeoutMs: 50 })).toBe(true);
    expect(child.requests[3]?.params).toEqual({ request_id: other.id });
    const err = await rejection(other.result);
    expect(err.code).toBe("cancelled");
    expect(err.message).toContain("did not end it within 50 ms");
  });

  test("client.cancel(id) with one of its ids as a number cancels that request, as the string does", async () => {
    // The client's ids are strings; the core tells 5 from "5", so a number went to the core as
    // another request's id, answered {cancelled: false}, and the chat ran on.
    const child = new FakeChild((req, c) => {
      if (req.method !== "cancel") return;
      const target = (req.params as { request_id?: unknown }).request_id;
      c.send({ id: req.id, type: "result", result: { cancelled: typeof target === "string" } });
      if (typeof target === "string")
        c.send({ id: target, type: "error", code: "cancelled", message: "cancelled by the host" });
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const chat = client.chat({ input: "a" });
    expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
    expect(await client.cancel(Number(chat.id))).toBe(true);
    expect((await rejection(chat.result)).code).toBe("cancelled");
  });

  test("params JSON cannot carry fail their own call with invalid_request, never the start", async () => {
    // A cycle in a call made while the core started threw out of the connection's attach():
    // start() rejected with core_exited and the spawned core was left running, unkilled.
    const child = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: { status: "ok" } }));
    const client = track(new LocalAiClient({ binary: "local-ai", spawn: child.spawn }));
    const starting = client.start();
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const held = client.request("sessions.rename", { title: cyclic });
    await starting;
    const calls = [
      held,
      client.request("echo", { n: 10n }),
      client.chat({ input: "hi", cyclic } as never).result,
    ];
    for (const call of calls) {
      const err = await rejection(call);
      expect(err.code).toBe("invalid_request");
      expect(err.message).toContain("cannot be sent as JSON");
    }
    expect(await client.ping()).toEqual({ status: "ok" });
    expect(child.requests.map((r) => r.method)).toEqual(["ping"]);
  });
});

describe("numeric options given as NaN (Number() of an unset setting)", () => {
  test("maxLineBytes, stderrTailLines and maxBufferedEvents keep their defaults", async () => {
    const child = new FakeChild((req, c) => {
      if (req.method === "flood") {
        for (let i = 0; i < 10_005; i++) c.send({ id: req.id, type: "event", event: "tick", n: i });
        c.send({ id: req.id, type: "result", result: {} });
      } else if (req.method === "split") {
        // One line in two writes: the line's buffer was sized by the limit, NaN, and the
        // second part threw a RangeError in the stdout listener, uncaught in the host.
        c.stdout.write(`{"id":"${req.id}","type":"result",`);
        setTimeout(() => c.stdout.write('"result":{"whole":true}}\n'), 10);
      }
    });
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        maxLineBytes: Number.NaN,
        stderrTailLines: Number.NaN,
        maxBufferedEvents: Number.NaN,
      }),
    );
    expect(await client.request("split")).toEqual({ whole: true });
    // Unread events were held without bound.
    const flood = client.stream("flood");
    await flood.result;
    expect(flood.droppedEvents).toBe(5);
    // The stderr tail, copied into every core_exited, grew with every log line.
    for (let i = 0; i < 60; i++) child.stderr.write(`line ${i}\n`);
    const pending = client.request("never", {}, { timeoutMs: 0 });
    await Bun.sleep(20);
    child.exit(1, null);
    expect((await rejection(pending)).data?.stderr_tail).toHaveLength(50);
  });
});

describe("a time limit given as NaN", () => {
  test("requestTimeoutMs or a call's timeoutMs NaN is the default limit, not none", async () => {
    // With no limit, a call to a core that never answers (initialize included) waited for good.
    const child = new FakeChild();
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: Number.NaN }),
    );
    const outcomes: string[] = [];
    const note = (call: Promise<unknown>) =>
      call.then(
        () => outcomes.push("answered"),
        (err: { code?: string; data?: { timeout_ms?: number } }) =>
          outcomes.push(`${err.code} ${err.data?.timeout_ms}`),
      );
    jest.useFakeTimers();
    try {
      note(client.request("never"));
      note(client.request("never", {}, { timeoutMs: Number.NaN }));
      note(client.embed({ input: "x" }, { timeoutMs: Number.NaN }));
      jest.advanceTimersByTime(60_000);
    } finally {
      jest.useRealTimers();
    }
    await Bun.sleep(20);
    expect(outcomes).toEqual(["timeout 60000", "timeout 60000", "timeout 60000"]);
  });
});

describe("a core that exits while calls nobody awaits are pending", () => {
  test("client.cancel() left unawaited is no unhandled rejection, as no other call's is", async () => {
    // ping(), embed() and a stream's result were never reported unhandled; client.cancel(id),
    // fired and forgotten as chat.cancel() is, rejected with core_exited unhandled, which ends a
    // Node host (and failed this test as an error between tests).
    const unhandled: unknown[] = [];
    const collect = (err: unknown) => unhandled.push(err);
    process.on("unhandledRejection", collect);
    try {
      const child = new FakeChild(() => {});
      const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
      const chat = client.chat({ input: "a" });
      expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
      void client.cancel(chat.id);
      void client.cancel();
      void client.ping();
      child.exit(1, null);
      expect((await rejection(chat.result)).code).toBe("core_exited");
      // Unhandled rejections are reported once the microtasks have run, before the next turn.
      await new Promise((resolve) => setImmediate(resolve));
      // Awaited, it still rejects.
      expect((await rejection(client.cancel(chat.id))).code).toBe("core_exited");
    } finally {
      process.off("unhandledRejection", collect);
    }
    expect(unhandled).toEqual([]);
  });
});
