import { describe, expect, test } from "bun:test";
import { fuseRanks, RRF_K } from "../../src/store/rank-fusion.ts";

describe("fuseRanks", () => {
  test("an item both lists hold outranks one that is first in one list only", () => {
    const fused = fuseRanks([
      [1, 2, 3],
      [4, 2, 5],
    ]);
    expect(fused.map((f) => f.id)).toEqual([2, 4, 1, 5, 3]);
    expect(fused[0]?.score).toBeCloseTo(2 / (RRF_K + 2));
    expect(fused[1]?.score).toBeCloseTo(1 / (RRF_K + 1));
  });

  test("equal scores go to the higher id; one list alone keeps its order", () => {
    expect(fuseRanks([[7], [9]]).map((f) => f.id)).toEqual([9, 7]);
    expect(fuseRanks([[3, 1, 2]]).map((f) => f.id)).toEqual([3, 1, 2]);
    expect(fuseRanks([[], []])).toEqual([]);
  });

  test("k sets how much a first place weighs against agreement", () => {
    // With a tiny k, first place in one list beats fourth place in both; with 60, agreement wins.
    const lists = [
      [1, 5, 6, 2],
      [3, 7, 8, 2],
    ];
    expect(fuseRanks(lists, 0.1)[0]?.id).toBe(3);
    expect(fuseRanks(lists)[0]?.id).toBe(2);
  });
});
