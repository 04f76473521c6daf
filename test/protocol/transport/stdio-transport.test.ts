import { describe, expect, test } from "bun:test";
import { StdioTransport, type TransportLimits } from "../../../src/protocol/transport/stdio-transport.ts";
import type { Sink } from "../../../src/protocol/transport/writer.ts";
import { waitFor } from "../../fixtures/wait.ts";

const LIMITS: TransportLimits = { maxLineBytes: 64, queueSize: 16, drainTimeoutMs: 1000 };
const enc = new TextEncoder();

/** A transport over an input the test feeds, writing into `written`. */
function transportOver(sink?: Sink, limits: TransportLimits = LIMITS, handle?: (line: string) => void) {
  let input!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({
    start(c) {
      input = c;
    },
  });
  const written: string[] = [];
  const recorder: Sink = { write: (data) => void written.push(data) };
  const transport = new StdioTransport(stream, sink ?? recorder, limits);
  const lines: string[] = [];
  const listening = transport.listen((line) => {
    handle?.(line);
    lines.push(line);
  });
  const feed = (text: string) => input.enqueue(enc.encode(text));
  const messages = () =>
    written
      .join("")
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  return { transport, lines, listening, feed, end: () => input.close(), messages };
}

describe("StdioTransport: whole lines in, whole messages out", () => {
  test("lines arrive whole and in order however the bytes were split; a last one without its newline counts at EOF", async () => {
    const t = transportOver();
    t.feed('{"id":1,"me');
    t.feed('thod":"ping"}\n{"id":2}\r\n\n  \n{"id"');
    t.feed(":3}");
    t.end();
    await t.listening;
    expect(t.lines).toEqual(['{"id":1,"method":"ping"}', '{"id":2}', '{"id":3}']);
  });

  test("a line over the limit is answered here, with a null id and the limit; the next line still arrives", async () => {
    const t = transportOver();
    t.feed(`${"x".repeat(100)}\n{"id":1}\n`);
    t.end();
    await t.listening;
    await t.transport.drain();
    expect(t.lines).toEqual(['{"id":1}']);
    expect(t.messages()).toEqual([
      {
        id: null,
        type: "error",
        code: "invalid_request",
        message: "request line of 100 bytes exceeds the limit of 64 bytes",
        data: { reason: "line_too_long", line_bytes: 100, limit_bytes: 64 },
      },
    ]);
  });

  test("a line whose handling throws is answered internal_error, and the lines after it still arrive", async () => {
    const t = transportOver(undefined, LIMITS, (line) => {
      if (line === "boom") throw new RangeError("Maximum call stack size exceeded");
    });
    t.feed('boom\n{"id":2}\n');
    t.end();
    await t.listening;
    await t.transport.drain();
    expect(t.lines).toEqual(['{"id":2}']);
    expect(t.messages()).toEqual([
      expect.objectContaining({ id: null, type: "error", code: "internal_error" }),
    ]);
  });

  test("new limits apply to the lines read after them (the config loads after start-up)", async () => {
    const t = transportOver();
    t.transport.setLimits({ ...LIMITS, maxLineBytes: 8 });
    t.feed('{"id":12}\n{"id":1}\n');
    t.end();
    await t.listening;
    await t.transport.drain();
    expect(t.lines).toEqual(['{"id":1}']);
    expect(t.messages()[0].message).toBe("request line of 9 bytes exceeds the limit of 8 bytes");
  });

  test("stopReading ends listen; what was left of a line is not delivered", async () => {
    const t = transportOver();
    t.feed('{"id":1}\n{"id":2');
    await Bun.sleep(5);
    t.transport.stopReading();
    await t.listening;
    expect(t.lines).toEqual(['{"id":1}']);
  });

  test("messages go out through the writer; drain waits for them, but only up to drainTimeoutMs", async () => {
    const t = transportOver();
    t.transport.event({ id: 1, type: "event", event: "tick", n: 1 });
    expect(t.transport.tryTerminal({ id: 1, type: "result", result: {} })).toBe(true);
    await t.transport.terminal({ id: 2, type: "result", result: {} });
    await t.transport.drain();
    expect(t.messages().map((m) => [m.id, m.type])).toEqual([
      [1, "event"],
      [1, "result"],
      [2, "result"],
    ]);

    const stuck = transportOver(
      { write: () => new Promise<void>(() => {}) },
      { ...LIMITS, drainTimeoutMs: 50 },
    );
    stuck.transport.event({ id: 1, type: "event", event: "tick" });
    await Bun.sleep(1);
    const t0 = performance.now();
    await stuck.transport.drain();
    expect(performance.now() - t0).toBeGreaterThanOrEqual(40);
    stuck.transport.stopReading();
  });
});

describe("StdioTransport: a host that reads no answers", () => {
  /** An input of endless ping lines, 10 a read, made only when the transport reads. */
  function endlessPings() {
    let reads = 0;
    const stream = new ReadableStream<Uint8Array>(
      {
        // A read of a pipe waits for I/O: a pull answered at once would never let a timer run.
        async pull(c) {
          await new Promise((r) => setTimeout(r, 0));
          reads++;
          c.enqueue(enc.encode('{"id":1,"method":"ping"}\n'.repeat(10)));
        },
      },
      { highWaterMark: 0 },
    );
    return { stream, reads: () => reads };
  }
  /** A sink that takes nothing until `open()`: a host not reading its stdout. */
  function stuckSink() {
    let release: (() => void) | undefined;
    let open = false;
    const sink: Sink = {
      write: () => (open ? undefined : new Promise<void>((r) => (release = r))),
    };
    const openUp = () => {
      open = true;
      release?.();
    };
    return { sink, open: openUp };
  }
  const settle = () => new Promise((r) => setTimeout(r, 30));

  test("it stops reading requests while a queue's worth of answers wait, and goes on once they are read", async () => {
    const input = endlessPings();
    const host = stuckSink();
    const t = new StdioTransport(input.stream, host.sink, LIMITS);
    let lines = 0;
    const listening = t.listen(() => {
      lines++;
      void t.terminal({ id: lines, type: "result", result: { status: "ok" } });
    });
    // Reading stops once the answers' backlog is full: wait for a quiet spell (a loaded machine
    // takes a while to get there; without the hold it never comes, and 3 s pass).
    let stuckAt = -1;
    for (let i = 0; i < 100 && stuckAt !== input.reads(); i++) {
      stuckAt = input.reads();
      await settle();
    }
    expect(input.reads()).toBe(stuckAt);
    // A batch in the sink (at most a queue), a queue full, a queue's worth waiting, and the read
    // that made it so.
    expect(lines).toBeLessThanOrEqual(3 * LIMITS.queueSize + 10);
    host.open();
    expect(await waitFor(() => input.reads() > stuckAt + 10, { timeoutMs: 5000 })).toBe(true);
    expect(input.reads()).toBeGreaterThan(stuckAt + 10);
    t.stopReading();
    await listening;
  });

  test("stopping while held back ends listen at once", async () => {
    const input = endlessPings();
    const t = new StdioTransport(input.stream, stuckSink().sink, LIMITS);
    const listening = t.listen(() => void t.terminal({ id: 1, type: "result", result: {} }));
    await settle();
    t.stopReading();
    expect(await Promise.race([listening.then(() => "ended"), settle().then(() => "still")])).toBe("ended");
  });
});
