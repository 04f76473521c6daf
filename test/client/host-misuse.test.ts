import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
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
});
