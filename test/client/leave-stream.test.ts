import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild, type FakeRequest } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// Leaving a `for await` over a stream early (break, return, a throw) is a host done with it: the
// chat must stop on the core too, not generate on for nobody until it ends by itself.
afterEach(killFakes);

/**
 * A core that answers ping, and whose other calls send one event and run until cancelled, or, for input "quick", end at once
 * after two events; a cancel of a running chat ends it with `cancelled`.
 */
function core() {
  const running = new Set<string>();
  const child = new FakeChild((req, c) => {
    if (req.method === "cancel") {
      const target = String(req.params.request_id);
      const caught = running.delete(target);
      c.send({ id: req.id, type: "result", result: { cancelled: caught } });
      if (caught) c.send({ id: target, type: "error", code: "cancelled", message: "cancelled" });
      return;
    }
    if (req.method === "ping") return c.send({ id: req.id, type: "result", result: { status: "ok" } });
    c.send({ id: req.id, type: "event", event: "llm_chunk", delta: "a" });
    if (req.params.input === "quick") {
      c.send({ id: req.id, type: "event", event: "llm_chunk", delta: "b" });
      c.send({ id: req.id, type: "result", result: { response: "ab" } });
    } else running.add(req.id);
  });
  const cancels = (): FakeRequest[] => child.requests.filter((r) => r.method === "cancel");
  return { child, cancels };
}

async function startOn(child: FakeChild) {
  return track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
}

describe("leaving a for-await over a stream early", () => {
  test("break cancels the chat on the core, and its result is the core's cancelled", async () => {
    const { child, cancels } = core();
    const client = await startOn(child);
    const chat = client.chat({ input: "long" });
    for await (const _ of chat) break;
    expect(await waitFor(() => cancels().length === 1, { intervalMs: 2 })).toBe(true);
    expect(cancels()[0]?.params).toEqual({ request_id: chat.id });
    expect((await rejection(chat.result)).code).toBe("cancelled");
  });

  test("a throw out of the loop cancels it too", async () => {
    const { child, cancels } = core();
    const client = await startOn(child);
    const stream = client.stream("test.long", {});
    const thrown = await (async () => {
      for await (const _ of stream) throw new Error("the host's own bug");
    })().catch((err: Error) => err.message);
    expect(thrown).toBe("the host's own bug");
    expect((await rejection(stream.result)).code).toBe("cancelled");
    expect(cancels()).toHaveLength(1);
  });

  test("a stream that already ended sends no cancel, though events were left unread", async () => {
    const { child, cancels } = core();
    const client = await startOn(child);
    const chat = client.chat({ input: "quick" });
    expect((await chat.result).response).toBe("ab");
    for await (const _ of chat) break;
    // A ping after it: had a cancel been written, the core would have read it first.
    await client.ping();
    expect(cancels()).toHaveLength(0);
  });

  test("an abort and then a break send one cancel, not two", async () => {
    const { child, cancels } = core();
    const client = await startOn(child);
    const controller = new AbortController();
    const chat = client.chat({ input: "long" }, { signal: controller.signal });
    for await (const _ of chat) {
      controller.abort();
      break;
    }
    expect((await rejection(chat.result)).code).toBe("cancelled");
    await client.ping();
    expect(cancels()).toHaveLength(1);
  });

  test("a break and then an abort (a finally's) send one cancel, not two", async () => {
    // A core slow to carry out the cancel: the chat still runs when the finally aborts. Before,
    // the abort sent a second cancel of a chat the break had cancelled already.
    const held: FakeRequest[] = [];
    const child = new FakeChild((req, c) => {
      if (req.method === "cancel") held.push(req);
      else if (req.method === "ping") c.send({ id: req.id, type: "result", result: { status: "ok" } });
      else c.send({ id: req.id, type: "event", event: "llm_chunk", delta: "a" });
    });
    const client = await startOn(child);
    const controller = new AbortController();
    const chat = client.chat({ input: "long" }, { signal: controller.signal });
    try {
      for await (const _ of chat) break;
    } finally {
      controller.abort();
    }
    await client.ping();
    expect(held).toHaveLength(1);
    expect(chat.done).toBe(false);
    // The core carries it out: the chat ends with its cancelled.
    child.send({ id: held[0]?.id, type: "result", result: { cancelled: true } });
    child.send({ id: chat.id, type: "error", code: "cancelled", message: "cancelled" });
    expect((await rejection(chat.result)).code).toBe("cancelled");
  });

  test("a stream opened as not cancellable is left without a cancel", async () => {
    const { child, cancels } = core();
    const client = await startOn(child);
    const stream = client.stream("test.long", {}, { cancellable: false, timeoutMs: 60_000 });
    for await (const _ of stream) break;
    await client.ping();
    expect(cancels()).toHaveLength(0);
    expect(stream.done).toBe(false);
  });
});
