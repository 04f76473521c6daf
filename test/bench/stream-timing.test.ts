import { describe, expect, test } from "bun:test";
import { medianInterval } from "../../bench/overhead/stream-timing.ts";

// The bench's interval for a median (docs/performance.md, "The session in one write"): order
// statistics chosen from the binomial's tails, so the ranks are known exactly for small runs.

const ranks = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

describe("medianInterval", () => {
  test("under 6 values there is none: even the extremes cover less than 95%", () => {
    expect(medianInterval(ranks(5), 0)).toBe("n/a");
    expect(medianInterval([], 0)).toBe("n/a");
  });

  test("6 values: the extremes (1 − 2/64 = 96.9%); 10: the 2nd and 9th (97.9%)", () => {
    expect(medianInterval(ranks(6), 0)).toBe("[1, 6]");
    expect(medianInterval(ranks(10), 0)).toBe("[2, 9]");
  });

  test("40 values: the 14th and 27th, sorted first, NaN left out", () => {
    const values = [Number.NaN, ...ranks(40).reverse()];
    expect(medianInterval(values, 0)).toBe("[14, 27]");
  });
});
