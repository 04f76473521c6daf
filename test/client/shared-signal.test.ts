import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

afterEach(killFakes);

/** An AbortController's signal that counts the abort listeners on it, as Node's leak warning does. */
function countedSignal() {
  const controller = new AbortController();
  const listeners = new Set<() => void>();
  let most = 0;
  const signal = {
    get aborted() {
      return controller.signal.aborted;
    },
    addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }) {
      const once = () => {
        listeners.delete(listener);
        listener();
      };
      listeners.add(listener);
      most = Math.max(most, listeners.size);
      controller.signal.addEventListener(type, options?.once ? once : listener, options);
      (listener as unknown as { wrapped: () => void }).wrapped = options?.once ? once : listener;
    },
    removeEventListener(type: "abort", listener: () => void) {
      listeners.delete(listener);
      const wrapped = (listener as unknown as { wrapped?: () => void }).wrapped ?? listener;
      controller.signal.removeEventListener(type, wrapped);
    },
  };
  return { controller, signal, listeners, most: () => most };
}

describe("one AbortSignal on many calls", () => {
  test("holds one listener however many calls wait on it, and none once they ended", async () => {
    // A listener per call: Node warned of a leak (MaxListenersExceededWarning, "11 abort
    // listeners added to [AbortSignal]") for a host that aborts a window's work with one signal.
    const child = new FakeChild((req, c) => {
      if (req.method === "ping") c.send({ id: req.id, type: "result", result: { status: "ok" } });
      if (req.method === "cancel") {
        const target = (req.params as { request_id: string }).request_id;
        c.send({ id: req.id, type: "result", result: { cancelled: true } });
        c.send({ id: target, type: "error", code: "cancelled", message: "cancelled by the host" });
      }
    });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const { controller, signal, listeners, most } = countedSignal();
    const pings = Array.from({ length: 20 }, () => client.ping({ signal }));
    const chats = Array.from({ length: 20 }, () => client.chat({ input: "hi" }, { signal }));
    expect(await Promise.all(pings)).toHaveLength(20);
    expect(await waitFor(() => child.requests.length === 40, { intervalMs: 2 })).toBe(true);
    controller.abort();
    for (const chat of chats) expect((await rejection(chat.result)).code).toBe("cancelled");
    expect(child.requests.filter((r) => r.method === "cancel")).toHaveLength(20);
    expect(most()).toBe(1);
    expect(listeners.size).toBe(0);
    // Calls that ended by their answer let the signal go too.
    const more = countedSignal();
    await Promise.all(Array.from({ length: 20 }, () => client.ping({ signal: more.signal })));
    expect(more.most()).toBe(1);
    expect(more.listeners.size).toBe(0);
  });
});

describe("a signal whose removeEventListener throws", () => {
  test("the call still settles with its answer, and the throw reaches nothing of the host's", async () => {
    // The listener is let go as the call settles, in the core's stdout listener: a throw there
    // stopped the settle halfway (the call out of the table, its promise never settled) and
    // escaped as an uncaught exception in the host. addEventListener's throw was already caught.
    const child = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: { status: "ok" } }));
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    const signal = {
      aborted: false,
      addEventListener: () => {},
      removeEventListener: () => {
        throw new Error("removeEventListener refused");
      },
    };
    const answers = [client.ping({ signal }), client.request("echo", {}, { signal, timeoutMs: 2000 })];
    expect(await Promise.all(answers)).toEqual([{ status: "ok" }, { status: "ok" }]);
  });
});
