import { expect, test } from "bun:test";
import { backoffDelayMs } from "../../src/util/backoff.ts";

test("the delay doubles per attempt up to its cap, and never past what a timer holds", () => {
  expect([1, 2, 3, 4].map((a) => backoffDelayMs(a, 500, 3000))).toEqual([500, 1000, 2000, 3000]);
  // setTimeout takes a longer delay as 1 ms: `maxDelayMs: Infinity` restarted at once, forever.
  expect(backoffDelayMs(60, 500, Number.POSITIVE_INFINITY)).toBe(2 ** 31 - 1);
  expect(backoffDelayMs(1, 2 ** 40, 2 ** 41)).toBe(2 ** 31 - 1);
});
