import { describe, expect, test } from "bun:test";
import { dot, ownerKey, SignIndex, signBits } from "../../src/store/vector-index.ts";
import { exactTop, SyntheticVectors } from "../fixtures/synthetic-vectors.ts";

describe("signBits", () => {
  test("bit i is set where component i is positive, across word boundaries", () => {
    const v = new Float32Array(40);
    for (const i of [0, 5, 31, 32, 39]) v[i] = 0.5;
    v[6] = -0.5;
    const bits = signBits(v);
    expect(bits.length).toBe(2);
    expect(bits[0]).toBe(1 | (1 << 5) | (1 << 31) | 0);
    expect(bits[1]).toBe(1 | (1 << 7));
  });
});

describe("SignIndex", () => {
  const vec = (...on: number[]) => {
    const v = new Float32Array(64).fill(-1);
    for (const i of on) v[i] = 1;
    return signBits(v);
  };

  test("nearest orders by Hamming distance and limits to the owners asked for", () => {
    const index = new SignIndex(64, 2);
    index.put(1, "a", vec(0, 1, 2, 3));
    index.put(2, "a", vec(0, 1));
    index.put(3, "b", vec(0, 1, 2));
    index.put(4, "a", vec(40, 41, 42, 43, 44));
    expect(index.size).toBe(4);
    expect(index.nearest(vec(0, 1, 2), 3)).toEqual([3, 1, 2]);
    expect(index.nearest(vec(0, 1, 2), 3, ["a"])).toEqual([1, 2, 4]);
    expect(index.nearest(vec(0, 1, 2), 3, ["nobody"])).toEqual([]);
  });

  test("put replaces an id's entry; remove moves the last entry into its place", () => {
    const index = new SignIndex(64, 1);
    index.put(1, "a", vec(0));
    index.put(2, "a", vec(10));
    index.put(3, "a", vec(20));
    index.put(1, "a", vec(30));
    expect(index.size).toBe(3);
    expect(index.nearest(vec(30), 1)).toEqual([1]);
    index.remove(1);
    index.remove(99);
    expect(index.size).toBe(2);
    expect(index.has(1)).toBe(false);
    expect(index.nearest(vec(20), 1)).toEqual([3]);
    expect(index.nearest(vec(10), 2)).toEqual([2, 3]);
  });

  test("an owner whose entries are all removed is forgotten, its code reused without widening another's scope", () => {
    // A core runs for days while users come and go (users.delete removes their rows through the
    // deletion log): the interned owners must not keep every user id ever seen (docs/agent.md "Memory").
    const index = new SignIndex(64, 4);
    for (let i = 0; i < 1000; i++) index.put(i, `user-${i}`, vec(i % 64));
    expect(index.ownersKnown).toBe(1000);
    for (let i = 0; i < 1000; i++) index.remove(i);
    expect(index.ownersKnown).toBe(0);
    index.put(1, "a", vec(0));
    index.put(2, "b", vec(0));
    index.put(2, "c", vec(1)); // a replaced entry's old owner goes too
    expect(index.ownersKnown).toBe(2);
    index.put(3, "d", vec(0)); // takes b's freed code
    expect(index.nearest(vec(0), 5, ["b"])).toEqual([]);
    expect(index.nearest(vec(0), 5, ["d"])).toEqual([3]);
    expect(index.nearest(vec(0), 5, ["a", "c"])).toEqual([1, 2]);
    expect(index.nearest(vec(0), 5)).toEqual([1, 3, 2]);
  });

  test("an owner may be a key's part: a scan of the key takes its parts, and leaves out the one skipped", () => {
    const index = new SignIndex(64, 4);
    index.put(1, ownerKey("ann", "s1"), vec(0, 1, 2));
    index.put(2, ownerKey("ann", "s2"), vec(0, 1));
    index.put(3, ownerKey("ann"), vec(0));
    index.put(4, ownerKey("bob", "s1"), vec(0, 1, 2));
    expect(index.nearest(vec(0, 1, 2), 5, ["ann"])).toEqual([1, 2, 3]);
    expect(index.nearest(vec(0, 1, 2), 5, ["ann"], ownerKey("ann", "s1"))).toEqual([2, 3]);
    expect(index.nearest(vec(0, 1, 2), 5, ["bob"], ownerKey("ann", "s1"))).toEqual([4]);
    expect(index.nearest(vec(0, 1, 2), 5, undefined, ownerKey("bob", "s1"))).toEqual([1, 2, 3]);
  });

  test("a bits array of another width is refused", () => {
    expect(() => new SignIndex(64).put(1, "a", new Int32Array(3))).toThrow("3 words");
  });

  test("its candidates rescored exactly agree with an exact float search on clustered vectors", () => {
    const gen = new SyntheticVectors(768, 40, 3);
    const rows = Array.from({ length: 2000 }, (_, i) => ({ id: i + 1, vector: gen.vector(i) }));
    const index = new SignIndex(768);
    for (const r of rows) index.put(r.id, "u", signBits(r.vector));
    let same = 0;
    const queries = 50;
    for (let q = 0; q < queries; q++) {
      const query = gen.near((rows[gen.int(rows.length)] as (typeof rows)[number]).vector);
      const candidates = new Set(index.nearest(signBits(query), 256));
      const rescored = exactTop(
        query,
        rows.filter((r) => candidates.has(r.id)),
        10,
      );
      if (JSON.stringify(rescored) === JSON.stringify(exactTop(query, rows, 10))) same++;
    }
    expect(same / queries).toBeGreaterThanOrEqual(0.98);
  });

  test("dot is the cosine of normalized vectors", () => {
    expect(dot([0.6, 0.8], [0.6, 0.8])).toBeCloseTo(1);
    expect(dot([1, 0], [0, 1])).toBe(0);
  });
});
