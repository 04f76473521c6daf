import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient, type LocalAiClientOptions } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

// Events held for a stream nobody reads are bounded by their bytes too, not by their count alone:
// 10 000 events of megabytes each were gigabytes of the host's memory.
afterEach(killFakes);

const MiB = 1024 * 1024;

/** A client whose core answers `big` with `count` events of `bytes` characters each, then a result. */
async function start(count: number, bytes: number, extra: Partial<LocalAiClientOptions> = {}) {
  const child = new FakeChild((req, c) => {
    if (req.method !== "big") return;
    const text = "x".repeat(bytes);
    for (let n = 0; n < count; n++) c.send({ id: req.id, type: "event", event: "chunk", n, text });
    c.send({ id: req.id, type: "result", result: { sent: count } });
  });
  return track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, ...extra }));
}

async function numbers(stream: AsyncIterable<unknown>): Promise<number[]> {
  const seen: number[] = [];
  for await (const e of stream) seen.push((e as { n: number }).n);
  return seen;
}

describe("an unread stream's events, by bytes", () => {
  test("past maxBufferedBytes new ones are dropped and counted, as past maxBufferedEvents", async () => {
    const client = await start(10, MiB, { maxBufferedBytes: 3.5 * MiB });
    const stream = client.stream("big");
    expect(await stream.result).toEqual({ sent: 10 });
    // Before: all ten were held (the count limit, 10 000, was far off).
    expect(stream.droppedEvents).toBe(7);
    expect(await numbers(stream)).toEqual([0, 1, 2]);
  });

  test("by default at most 64 MiB of them are held", async () => {
    const client = await start(20, 4 * MiB);
    const stream = client.stream("big");
    expect(await stream.result).toEqual({ sent: 20 });
    expect(stream.droppedEvents).toBe(5);
    expect(await numbers(stream)).toHaveLength(15);
  });

  test("maxBufferedBytes of a wrong type or negative fails start() with invalid_request", async () => {
    for (const maxBufferedBytes of [-1, "1000" as never]) {
      const err = await LocalAiClient.start({
        binary: "local-ai",
        spawn: new FakeChild().spawn,
        maxBufferedBytes,
      }).catch((e) => e);
      expect(err.code).toBe("invalid_request");
      expect(err.data).toEqual({ field: "maxBufferedBytes" });
    }
  });
});
