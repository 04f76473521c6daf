import { describe, expect, test } from "bun:test";
import { RestartBudget } from "../../src/runtime/restart-budget.ts";

describe("RestartBudget (a rate)", () => {
  const rate = { max: 2, windowMs: 1000 };

  test("allows max restarts within the window, numbering them for the back-off", () => {
    const b = new RestartBudget();
    expect(b.take(rate, 0)).toEqual({ allowed: true, attempt: 1 });
    expect(b.take(rate, 100)).toEqual({ allowed: true, attempt: 2 });
    expect(b.take(rate, 200)).toEqual({ allowed: false, used: 2, nextAt: 1000 });
    expect(b.used(rate, 200)).toBe(2);
  });

  test("recovers as restarts leave the window, one at a time", () => {
    const b = new RestartBudget();
    b.take(rate, 0);
    b.take(rate, 500);
    expect(b.take(rate, 999)).toMatchObject({ allowed: false, nextAt: 1000 });
    expect(b.take(rate, 1000)).toEqual({ allowed: true, attempt: 2 });
    expect(b.take(rate, 1200)).toMatchObject({ allowed: false, nextAt: 1500 });
    expect(b.used(rate, 5000)).toBe(0);
  });

  test("peek records nothing", () => {
    const b = new RestartBudget();
    expect(b.peek(rate, 0)).toEqual({ allowed: true, attempt: 1 });
    expect(b.used(rate, 0)).toBe(0);
  });

  test("max 0: never automatic, no next time", () => {
    const b = new RestartBudget();
    expect(b.take({ max: 0, windowMs: 1000 }, 0)).toEqual({ allowed: false, used: 0, nextAt: null });
  });

  test("a lowered max waits for enough restarts to leave", () => {
    const b = new RestartBudget();
    b.take({ max: 3, windowMs: 1000 }, 0);
    b.take({ max: 3, windowMs: 1000 }, 100);
    b.take({ max: 3, windowMs: 1000 }, 200);
    expect(b.take({ max: 1, windowMs: 1000 }, 300)).toMatchObject({ allowed: false, used: 3, nextAt: 1200 });
  });
});
