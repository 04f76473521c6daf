import { describe, expect, test } from "bun:test";
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
});
