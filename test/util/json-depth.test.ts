import { describe, expect, spyOn, test } from "bun:test";
import { nestedDeeperThan } from "../../src/util/json-depth.ts";

const nest = (n: number) => JSON.parse(`${"[".repeat(n)}${"]".repeat(n)}`);

describe("nestedDeeperThan", () => {
  test("counts arrays and objects as levels; scalars are none", () => {
    expect(nestedDeeperThan(5, 0)).toBe(false);
    expect(nestedDeeperThan({}, 0)).toBe(true);
    expect(nestedDeeperThan({ a: [{ b: 1 }] }, 3)).toBe(false);
    expect(nestedDeeperThan({ a: [{ b: 1 }] }, 2)).toBe(true);
  });

  test("a depth JSON.stringify cannot write is found without recursion", () => {
    expect(nestedDeeperThan(nest(512))).toBe(false);
    expect(nestedDeeperThan(nest(513))).toBe(true);
    expect(nestedDeeperThan(nest(200_000))).toBe(true);
  });

  test("an array's numbers are not each taken up to be looked into: a big one does not hold the loop", () => {
    // Object.values of an array and a value pushed for each of its numbers: 100,000 took 50 ms on
    // the loop, an MCP tool's 14 MB result or input schema of them seconds, ping and cancel waiting.
    const values = spyOn(Object, "values");
    try {
      const wide = { a: Array.from({ length: 100_000 }, (_, i) => i), b: [[{ c: ["d"] }]] };
      expect(nestedDeeperThan(wide, 5)).toBe(false);
      expect(nestedDeeperThan(wide, 4)).toBe(true);
      expect(values.mock.calls.filter(([v]) => Array.isArray(v))).toEqual([]);
    } finally {
      values.mockRestore();
    }
  });
});
