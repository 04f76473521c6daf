import { describe, expect, test } from "bun:test";
import { Semaphore } from "../../src/util/semaphore.ts";

const never = () => new AbortController().signal;

describe("Semaphore", () => {
  test("up to capacity at once, then waiters in arrival order", async () => {
    const s = new Semaphore(() => 2);
    const a = await s.acquire(never());
    const b = await s.acquire(never());
    const order: string[] = [];
    const c = s.acquire(never()).then((r) => {
      order.push("c");
      return r;
    });
    const d = s.acquire(never()).then((r) => {
      order.push("d");
      return r;
    });
    await Bun.sleep(5);
    expect(order).toEqual([]);
    expect(s.inUse).toBe(2);
    expect(s.waiting).toBe(2);
    a();
    (await c)();
    b();
    (await d)();
    expect(order).toEqual(["c", "d"]);
    expect(s.idle).toBe(true);
  });

  test("a second release is a no-op, not a second permit", async () => {
    const s = new Semaphore(() => 1);
    const a = await s.acquire(never());
    a();
    const b = await s.acquire(never());
    a(); // must not free b's permit
    expect(s.inUse).toBe(1);
    let third = false;
    const c = s.acquire(never()).then((r) => {
      third = true;
      return r;
    });
    await Bun.sleep(5);
    expect(third).toBe(false);
    b();
    (await c)();
    expect(s.inUse).toBe(0);
  });

  test("an abort while waiting rejects with the signal's reason and leaves the line", async () => {
    const s = new Semaphore(() => 1);
    const held = await s.acquire(never());
    const ac = new AbortController();
    const gone = s.acquire(ac.signal);
    const next = s.acquire(never());
    ac.abort(new Error("cancelled by host"));
    await expect(gone).rejects.toThrow("cancelled by host");
    expect(s.waiting).toBe(1);
    held();
    (await next)();
    expect(s.idle).toBe(true);
  });

  test("an already aborted signal is refused even with a free permit", async () => {
    const s = new Semaphore(() => 1);
    const ac = new AbortController();
    ac.abort(new Error("too late"));
    await expect(s.acquire(ac.signal)).rejects.toThrow("too late");
    expect(s.inUse).toBe(0);
  });

  test("a newcomer does not overtake a waiter when capacity grows", async () => {
    let capacity = 1;
    const s = new Semaphore(() => capacity);
    const first = await s.acquire(never());
    const order: string[] = [];
    const waiter = s.acquire(never()).then((r) => {
      order.push("waiter");
      return r;
    });
    capacity = 2;
    // The waiter is still queued (capacity is read on decisions); the newcomer queues behind it.
    const newcomer = s.acquire(never()).then((r) => {
      order.push("newcomer");
      return r;
    });
    first();
    (await waiter)();
    (await newcomer)();
    expect(order).toEqual(["waiter", "newcomer"]);
  });

  test("failWaiters rejects every waiter; holders keep their permits", async () => {
    const s = new Semaphore(() => 1);
    const held = await s.acquire(never());
    const w1 = s.acquire(never());
    const w2 = s.acquire(never());
    const outcomes = Promise.allSettled([w1, w2]);
    s.failWaiters(new Error("shutting down"));
    for (const o of await outcomes) {
      expect(o.status).toBe("rejected");
      expect(String((o as PromiseRejectedResult).reason)).toContain("shutting down");
    }
    expect(s.inUse).toBe(1);
    held();
    expect(s.idle).toBe(true);
  });
});
