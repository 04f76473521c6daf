import { describe, expect, test } from "bun:test";
import type { OutboundMessage } from "../../../src/protocol/messages.ts";
import {
  MAX_HELD_CHARS,
  type Sink,
  WRITE_SLICE_CHARS,
  Writer,
} from "../../../src/protocol/transport/writer.ts";
import { LongText } from "../../../src/util/long-text.ts";
import { waitFor } from "../../fixtures/wait.ts";

/** A sink that records each batch and can be held (a stalled reader) or broken. */
function fakeSink() {
  const batches: string[] = [];
  let gate: Promise<void> = Promise.resolve();
  let open: () => void = () => {};
  let failWith: Error | undefined;
  let writes = 0;
  const sink: Sink = {
    async write(data) {
      writes++;
      if (failWith) throw failWith;
      await gate;
      batches.push(data);
    },
  };
  return {
    sink,
    batches,
    get writes() {
      return writes;
    },
    lines: () =>
      batches
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l)),
    stall() {
      gate = new Promise((r) => {
        open = r;
      });
    },
    resume() {
      open();
    },
    breakWith(err: Error) {
      failWith = err;
    },
  };
}

const ev = (n: number): OutboundMessage => ({ id: "c", type: "event", event: "llm_chunk", n });
const result = (id: string): OutboundMessage => ({ id, type: "result", result: { status: "ok" } });
/** For checks that something does not happen: a moment in which it would have. */
const tick = () => new Promise((r) => setTimeout(r, 5));

describe("Writer", () => {
  test("keeps FIFO order and writes one batch per drain", async () => {
    const s = fakeSink();
    const w = new Writer(s.sink, { queueSize: 100 });
    for (let i = 0; i < 10; i++) w.event(ev(i));
    await w.terminal(result("c"));
    expect(await w.drain(1000)).toBe(true);
    expect(s.writes).toBe(1);
    const lines = s.lines();
    expect(lines.map((l) => l.n ?? "end")).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, "end"]);
  });

  test("an event that cannot be serialized is left out and the request's output goes on", async () => {
    const s = fakeSink();
    const w = new Writer(s.sink, { queueSize: 100 });
    const deep = JSON.parse(`${"[".repeat(49_000)}${"]".repeat(49_000)}`);
    expect(w.eventOf("c", "tool_start", { step: 0, args: { a: deep } })).toBe(true);
    expect(w.eventOf("c", "tool_done", { step: 0 })).toBe(true);
    await w.terminal(result("c"));
    expect(await w.drain(1000)).toBe(true);
    expect(s.lines().map((l) => l.event ?? l.type)).toEqual(["tool_done", "result"]);
  });

  test("drops events when the queue is full while a slow reader holds the sink", async () => {
    const s = fakeSink();
    const w = new Writer(s.sink, { queueSize: 4 });
    s.stall();
    w.event(ev(0)); // taken by the first (stalled) batch
    await waitFor(() => s.writes === 1);
    const accepted = [1, 2, 3, 4, 5, 6, 7].map((n) => w.event(ev(n)));
    expect(accepted).toEqual([true, true, true, true, false, false, false]);
    expect(w.dropped).toBe(3);
    s.resume();
    expect(await w.drain(1000)).toBe(true);
    expect(s.lines().map((l) => l.n)).toEqual([0, 1, 2, 3, 4]);
  });

  test("results wait for room instead of being dropped", async () => {
    const s = fakeSink();
    const w = new Writer(s.sink, { queueSize: 2 });
    s.stall();
    w.event(ev(0));
    await waitFor(() => s.writes === 1);
    w.event(ev(1));
    w.event(ev(2));
    let delivered = false;
    const pending = w.terminal(result("r")).then(() => {
      delivered = true;
    });
    await tick();
    expect(delivered).toBe(false); // queue full: it waits
    s.resume();
    await pending;
    expect(await w.drain(1000)).toBe(true);
    expect(s.lines().at(-1)).toEqual({ id: "r", type: "result", result: { status: "ok" } });
    expect(w.dropped).toBe(0);
  });

  test("a broken sink is reported once and output is discarded without blocking", async () => {
    const s = fakeSink();
    const w = new Writer(s.sink, { queueSize: 2 });
    s.breakWith(new Error("EPIPE: broken pipe, write"));
    w.event(ev(0));
    await waitFor(() => w.isBroken);
    expect(w.isBroken).toBe(true);
    // Far more terminals than the queue holds: none may hang.
    await Promise.all(Array.from({ length: 50 }, (_, i) => w.terminal(result(String(i)))));
    expect(await w.drain(100)).toBe(true);
    expect(s.writes).toBe(1);
  });

  test("drain gives up after its timeout when the reader never reads", async () => {
    const s = fakeSink();
    const w = new Writer(s.sink, { queueSize: 10 });
    s.stall();
    await w.terminal(result("x"));
    const started = Date.now();
    expect(await w.drain(50)).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  test("answers the host leaves unread hold back its requests by their size, not only their count", async () => {
    const s = fakeSink();
    s.stall();
    const w = new Writer(s.sink, { queueSize: 1024 });
    const page = (id: string): OutboundMessage => ({
      id,
      type: "result",
      result: { text: "x".repeat(8 * 2 ** 20) },
    });
    // Eight answers of 8 MiB: far under the queue's 1,024 messages, at the characters' bound.
    expect(8 * 8 * 2 ** 20).toBe(MAX_HELD_CHARS);
    for (let i = 0; i < 7; i++) void w.terminal(page(`p${i}`));
    expect(w.backlogFull()).toBeUndefined();
    void w.terminal(page("p7"));
    const full = w.backlogFull();
    expect(full).toBeInstanceOf(Promise);
    let read = false;
    void full?.then(() => {
      read = true;
    });
    await tick();
    expect(read).toBe(false);
    // The host reads: what it took no longer counts, and requests are read again.
    s.resume();
    await waitFor(() => read);
  });
});

test("events a host leaves unread are dropped past MAX_HELD_CHARS too, whatever the queue's size", async () => {
  // A host that raised stdio.queue_size so as to lose no piece, then froze (a suspended app)
  // while a chat streamed big events: only the count was checked, so every event was kept, the
  // core growing by as much as the queue's size times an event's, far past the 64 Mi characters
  // the docs promise (docs/protocol.md, "A host that reads no answers").
  const s = fakeSink();
  s.stall();
  const w = new Writer(s.sink, { queueSize: 1_000_000 });
  const delta = "x".repeat(4 * 2 ** 20);
  let kept = 0;
  for (let n = 0; n < 24; n++) if (w.eventOf("c", "llm_chunk", { step: 0, delta, n })) kept++;
  // 16 events of 4 Mi characters reach the bound; the 17th and later are dropped and counted.
  expect(kept).toBe(MAX_HELD_CHARS / delta.length);
  expect(w.dropped).toBe(24 - kept);
  // Results still wait for room rather than being dropped, and everything kept goes out in order.
  const last = w.terminal(result("r"));
  s.resume();
  await last;
  expect(await w.drain(1000)).toBe(true);
  const lines = s.lines();
  expect(lines.map((l) => l.n ?? l.id)).toEqual([...Array.from({ length: kept }, (_, i) => i), "r"]);
});

test("a long answer is written a slice at a time, the loop turning between, never inside a surrogate pair", async () => {
  // A 20 MB image's sessions.attachment answer (27 Mi characters) went to stdout in one write:
  // its encoding held the main loop 100-200 ms on a 2-core machine, a ping or a cancel unread
  // meanwhile (a hostile review). The line is the same, in order; only its writes are cut.
  const writes: string[] = [];
  const order: string[] = [];
  const w = new Writer(
    {
      write: (data) => {
        writes.push(data);
        order.push("write");
      },
    },
    { queueSize: 100 },
  );
  // An emoji (a surrogate pair) right across the first slice's end.
  const data = `${"a".repeat(WRITE_SLICE_CHARS - 40)}\u{1F600}${"b".repeat(3 * WRITE_SLICE_CHARS)}`;
  const answered = w.terminal({ id: "a", type: "result", result: { data } });
  const pings = setInterval(() => order.push("ping"), 0);
  await answered;
  expect(await w.drain(5000)).toBe(true);
  clearInterval(pings);
  expect(writes.length).toBeGreaterThanOrEqual(4);
  for (const piece of writes) {
    expect(piece.length).toBeLessThanOrEqual(WRITE_SLICE_CHARS);
    expect(piece.isWellFormed()).toBe(true);
  }
  expect(JSON.parse(writes.join(""))).toEqual({ id: "a", type: "result", result: { data } });
  // The loop turned between the writes: a timer ran before the last one.
  expect(order.indexOf("ping")).toBeLessThan(order.lastIndexOf("write"));
});

test("an answer in pieces (a LongText: an image's base64) is written from its pieces, in order, among other lines", async () => {
  const writes: string[] = [];
  const w = new Writer({ write: (data) => void writes.push(data) }, { queueSize: 100 });
  const pieces = Array.from({ length: 3 }, (_, i) =>
    String.fromCharCode(65 + i).repeat(WRITE_SLICE_CHARS + 8),
  );
  w.event(ev(1));
  await w.terminal({ id: "a", type: "result", result: { data: new LongText(pieces), bytes: 3 } });
  await w.terminal(result("b"));
  expect(await w.drain(5000)).toBe(true);
  for (const piece of writes) expect(piece.length).toBeLessThanOrEqual(WRITE_SLICE_CHARS);
  const lines = writes
    .join("")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  expect(lines).toEqual([
    { id: "c", type: "event", event: "llm_chunk", n: 1 },
    { id: "a", type: "result", result: { data: pieces.join(""), bytes: 3 } },
    { id: "b", type: "result", result: { status: "ok" } },
  ]);
});
