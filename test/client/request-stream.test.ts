import { describe, expect, test } from "bun:test";
import { LocalAiError } from "../../src/client/errors.ts";
import { RequestStream } from "../../src/client/request-stream.ts";

const stream = (max = 10, onCancel = async () => true) =>
  new RequestStream<number, string>("1", "m", max, onCancel);

async function collect(s: RequestStream<number, string>): Promise<{ events: number[]; error?: unknown }> {
  const events: number[] = [];
  try {
    for await (const e of s) events.push(e);
  } catch (error) {
    return { events, error };
  }
  return { events };
}

describe("RequestStream", () => {
  test("delivers buffered and live events in order, then ends with the result", async () => {
    const s = stream();
    s.pushEvent(1);
    const got = collect(s);
    s.pushEvent(2);
    await Bun.sleep(1); // part of the test: let the loop drain the buffer, so 3 arrives live
    s.pushEvent(3);
    s.settle({ result: "ok" });
    expect(await got).toEqual({ events: [1, 2, 3] });
    expect(await s.result).toBe("ok");
    expect(s.done).toBe(true);
  });

  test("an error ends iteration after the events received, and rejects the result", async () => {
    const s = stream();
    s.pushEvent(1);
    const err = new LocalAiError("cancelled", "stop");
    s.settle({ error: err });
    const got = await collect(s);
    expect(got.events).toEqual([1]);
    expect(got.error).toBe(err);
    await expect(s.result).rejects.toBe(err);
  });

  test("it keeps at most maxBufferedBytes of events; what is read frees room", async () => {
    const s = new RequestStream<number, string>("1", "m", 100, async () => true, 250);
    const it = s[Symbol.asyncIterator]();
    s.pushEvent(1, 100);
    s.pushEvent(2, 100);
    s.pushEvent(3, 100); // 300 bytes: dropped
    expect(s.droppedEvents).toBe(1);
    expect(await it.next()).toEqual({ value: 1, done: false });
    s.pushEvent(4, 100); // 200 bytes again
    s.pushEvent(5, 1); // 201
    s.pushEvent(6, 100); // dropped
    expect(s.droppedEvents).toBe(2);
    s.settle({ result: "ok" });
    expect((await collect(s)).events).toEqual([2, 4, 5]);
  });

  test("an event over maxBufferedBytes is kept when nothing else is held", async () => {
    // A line maxLineBytes allows but the buffer's bound does not was dropped for a reader
    // between two reads, though the buffer was empty.
    const s = new RequestStream<number, string>("1", "m", 100, async () => true, 250);
    s.pushEvent(1, 1000);
    s.pushEvent(2, 1); // past the bound with the first held: dropped
    expect(s.droppedEvents).toBe(1);
    s.settle({ result: "ok" });
    expect((await collect(s)).events).toEqual([1]);
  });

  test("an unread stream keeps at most maxBuffered events and counts the rest", async () => {
    const s = stream(3);
    for (let i = 0; i < 10; i++) s.pushEvent(i);
    s.settle({ result: "ok" });
    expect(s.droppedEvents).toBe(7);
    expect((await collect(s)).events).toEqual([0, 1, 2]);
  });

  test("leaving the loop early stops buffering and is told once; cancel after the end is a no-op", async () => {
    let cancels = 0;
    let left = 0;
    const s = new RequestStream<number, string>(
      "1",
      "m",
      10,
      async () => {
        cancels++;
        return true;
      },
      Number.POSITIVE_INFINITY,
      () => left++,
    );
    s.pushEvent(1);
    s.pushEvent(2);
    for await (const _ of s) break;
    // A second loop left early, on a stream already left: told once, not again.
    for await (const _ of s) break;
    s.pushEvent(3);
    expect(left).toBe(1);
    expect(cancels).toBe(0);
    expect(await s.cancel()).toBe(true);
    s.settle({ result: "done" });
    expect(await s.cancel()).toBe(false);
    expect(cancels).toBe(1);
  });

  test("leaving the loop of a stream that already ended is not told: no stray cancel", async () => {
    let left = 0;
    const s = new RequestStream<number, string>(
      "1",
      "m",
      10,
      async () => true,
      100,
      () => left++,
    );
    s.pushEvent(1);
    s.pushEvent(2);
    s.settle({ result: "done" });
    for await (const _ of s) break;
    expect(left).toBe(0);
  });

  test("reads made before the last one settled each get an event or the end, never hang", async () => {
    // next() called twice without awaiting (as Promise.race with a timer does), then two loops
    // over one stream (a UI and a logger): the first read was once overwritten and never settled.
    const s = stream();
    const it = s[Symbol.asyncIterator]();
    const first = it.next();
    const second = it.next();
    const third = it.next();
    s.pushEvent(1);
    s.pushEvent(2);
    s.settle({ result: "ok" });
    expect(await Promise.all([first, second, third])).toEqual([
      { value: 1, done: false },
      { value: 2, done: false },
      { value: undefined, done: true },
    ]);

    const shared = stream();
    const loops = Promise.all([collect(shared), collect(shared)]);
    for (let i = 0; i < 4; i++) {
      shared.pushEvent(i);
      await Bun.sleep(1); // part of the test: each loop reads again between events
    }
    const err = new LocalAiError("cancelled", "stop");
    shared.settle({ error: err });
    const [a, b] = await loops;
    expect([...a.events, ...b.events].sort()).toEqual([0, 1, 2, 3]);
    expect([a.error, b.error]).toEqual([err, err]);
  });

  test("leaving one loop early ends the other reads waiting on the stream at once", async () => {
    const s = stream();
    const it = s[Symbol.asyncIterator]();
    const waiting = it.next();
    await it.return?.();
    const outcome = await Promise.race([waiting, Bun.sleep(200).then(() => "still waiting")]);
    expect(outcome).toEqual({ value: undefined, done: true });
  });

  test("a rejected result nobody awaits is not an unhandled rejection", async () => {
    let unhandled = 0;
    const onUnhandled = () => unhandled++;
    process.on("unhandledRejection", onUnhandled);
    stream().settle({ error: new LocalAiError("timeout", "late") });
    await Bun.sleep(20); // an unhandled rejection would be reported within this
    process.off("unhandledRejection", onUnhandled);
    expect(unhandled).toBe(0);
  });
});
