import { describe, expect, test } from "bun:test";
import { ByteBudget } from "../../src/util/byte-budget.ts";

const NEVER = new AbortController().signal;
/** Whether `p` has settled after the microtasks pending now have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  await Bun.sleep(0);
  return done;
}

describe("ByteBudget", () => {
  test("sizes within the budget go together; one that would pass it waits for room", async () => {
    const budget = new ByteBudget(100);
    const a = await budget.acquire(60, NEVER);
    const b = await budget.acquire(40, NEVER);
    expect(budget.inUse).toBe(100);
    const c = budget.acquire(10, NEVER);
    expect(await settled(c)).toBe(false);
    a();
    expect(await settled(c)).toBe(true);
    expect(budget.inUse).toBe(50);
    b();
    (await c)();
    expect(budget.inUse).toBe(0);
  });

  test("one bigger than the budget goes alone, when nothing else is held", async () => {
    const budget = new ByteBudget(100);
    const small = await budget.acquire(10, NEVER);
    const big = budget.acquire(500, NEVER);
    expect(await settled(big)).toBe(false);
    small();
    const releaseBig = await big;
    expect(budget.inUse).toBe(500);
    const next = budget.acquire(1, NEVER);
    expect(await settled(next)).toBe(false);
    releaseBig();
    (await next)();
  });

  test("arrival order: a small one does not overtake a big one waiting", async () => {
    const budget = new ByteBudget(100);
    const held = await budget.acquire(90, NEVER);
    const order: string[] = [];
    const big = budget.acquire(50, NEVER).then((r) => {
      order.push("big");
      return r;
    });
    const small = budget.acquire(5, NEVER).then((r) => {
      order.push("small");
      return r;
    });
    await Bun.sleep(0);
    expect(order).toEqual([]);
    held();
    (await big)();
    (await small)();
    expect(order).toEqual(["big", "small"]);
  });

  test("a waiter cancelled leaves the line with the reason, and those behind it move up", async () => {
    const budget = new ByteBudget(100);
    const held = await budget.acquire(80, NEVER);
    const cancel = new AbortController();
    const waiting = budget.acquire(50, cancel.signal);
    const behind = budget.acquire(10, NEVER);
    expect(await settled(behind)).toBe(false);
    const reason = new Error("cancelled");
    cancel.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(await settled(behind)).toBe(true);
    (await behind)();
    held();
    expect(budget.inUse).toBe(0);
    await expect(budget.acquire(1, cancel.signal)).rejects.toBe(reason);
  });

  test("a release twice counts once", async () => {
    const budget = new ByteBudget(100);
    const r = await budget.acquire(30, NEVER);
    r();
    r();
    expect(budget.inUse).toBe(0);
  });
});
