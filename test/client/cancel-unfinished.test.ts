import { afterEach, describe, expect, jest, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

afterEach(killFakes);

describe("a cancel the core confirms but never carries out", () => {
  test("still ends the wait: an abort, chat.cancel() and client.cancel(id) end the chat", async () => {
    // The core answered {cancelled: true} and never ended the chat: a chat has no time limit by
    // default, so the abort that was to end the wait left it pending for good.
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: true } });
    });
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: 200 }),
    );
    const controller = new AbortController();
    const chats = [client.chat({ input: "a" }, { signal: controller.signal }), client.chat({ input: "b" })];
    const third = client.chat({ input: "c" });
    expect(await waitFor(() => child.requests.length === 3, { intervalMs: 2 })).toBe(true);
    controller.abort();
    const cancels = [chats[1]!.cancel(), client.cancel(third.id)];
    for (const chat of [...chats, third]) {
      const err = await rejection(chat.result);
      expect(err.code).toBe("cancelled");
      expect(err.message).toContain("did not end it within 200 ms");
    }
    expect(await Promise.all(cancels)).toEqual([true, true]);
  });

  test("leaves the chat's own time limit in force when that comes sooner", async () => {
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: true } });
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const chat = client.chat({ input: "a" }, { timeoutMs: 300 });
    expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
    expect(await chat.cancel()).toBe(true);
    expect((await rejection(chat.result)).code).toBe("timeout");
  });

  test("a second confirmed cancel does not start the wait again: it ends from the first", async () => {
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") c.send({ id: req.id, type: "result", result: { cancelled: true } });
    });
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: 60_000 }),
    );
    const chat = client.chat({ input: "a" });
    expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
    const pending = (
      client as unknown as { connection: { pending: Map<string, { unconfirmedTimer?: unknown }> } }
    ).connection.pending;
    expect(await chat.cancel()).toBe(true);
    const first = pending.get(String(chat.id))?.unconfirmedTimer;
    expect(first).toBeDefined();
    expect(await chat.cancel()).toBe(true);
    expect(pending.get(String(chat.id))?.unconfirmedTimer).toBe(first);
  });
});

describe("with requestTimeoutMs 0", () => {
  for (const answers of [false, true]) {
    test(`an abort still ends the chat when the core ${answers ? "confirms but does not carry out" : "never answers"} its cancel`, async () => {
      // requestTimeoutMs 0 ("no limit for my calls") left the cancel unbounded too: an abort,
      // whose whole point is to stop waiting, left the chat pending for good on a stuck core.
      const child = new FakeChild((req, c) => {
        if (answers && req.method === "cancel")
          c.send({ id: req.id, type: "result", result: { cancelled: true } });
      });
      const client = track(
        await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: 0 }),
      );
      const controller = new AbortController();
      const chat = client.chat({ input: "a" }, { signal: controller.signal });
      const other = client.chat({ input: "b" });
      expect(await waitFor(() => child.requests.length === 2, { intervalMs: 2 })).toBe(true);
      const outcomes: string[] = [];
      const note = (p: Promise<unknown>) =>
        p.then(
          (v) => outcomes.push(`ok ${v}`),
          (e: Error) => outcomes.push(e.message),
        );
      jest.useFakeTimers();
      try {
        controller.abort();
        note(chat.result);
        note(other.cancel());
        note(other.result);
        for (let s = 0; s < 70 && outcomes.length < 3; s++) {
          jest.advanceTimersByTime(1000);
          for (let turn = 0; turn < 20; turn++) await new Promise((r) => process.nextTick(r));
        }
      } finally {
        jest.useRealTimers();
      }
      const why = answers ? "did not end it within 60000 ms" : "did not confirm its cancel";
      expect(outcomes.filter((o) => o.includes(why))).toHaveLength(2);
      expect(outcomes).toContain(answers ? "ok true" : "ok false");
    });
  }
});

test("an aborted embed's cancel, never answered, is not kept for good with requestTimeoutMs 0", async () => {
  // The cancel an abort of an embed (or a search, or a chat that timed out) sends on its own had
  // requestTimeoutMs 0's no limit: on a stuck core each stayed in the pending table for good.
  const child = new FakeChild();
  const client = track(
    await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, requestTimeoutMs: 0 }),
  );
  const controller = new AbortController();
  const embed = client.embed({ input: ["a"] } as never, { signal: controller.signal }).catch(() => {});
  expect(await waitFor(() => child.requests.length === 1, { intervalMs: 2 })).toBe(true);
  const pending = (client as unknown as { connection: { pending: Map<string, unknown> } }).connection.pending;
  jest.useFakeTimers();
  try {
    controller.abort();
    await embed;
    for (let turn = 0; turn < 20; turn++) await new Promise((r) => process.nextTick(r));
    expect(child.requests.map((r) => r.method)).toEqual(["embed", "cancel"]);
    expect(pending.size).toBe(1);
    jest.advanceTimersByTime(61_000);
  } finally {
    jest.useRealTimers();
  }
  expect(pending.size).toBe(0);
});
