import { describe, expect, spyOn, test } from "bun:test";
import { openStore } from "../../src/store/db/open.ts";
import { MemoryVectors } from "../../src/store/memory-vectors.ts";
import { Store } from "../../src/store/store.ts";
import { ownerKey } from "../../src/store/vector-index.ts";
import { commitNotedTurn } from "../fixtures/noted-turn.ts";
import { normalize } from "../fixtures/synthetic-vectors.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A unit vector pointing mostly along axis `axis` (of 8), a little along `lean`. */
function toward(axis: number, lean = (axis + 1) % 8, by = 0.2): Float32Array {
  const v = new Float32Array(8).fill(-0.01);
  v[axis] = 1;
  v[lean] = by;
  return normalize(v);
}

/** A noted turn, and its memory row's id. */
function turn(store: Store, user: string, session: string, text: string): number {
  commitNotedTurn(store, user, session, text);
  const rows = store.memory.search(user, text, 1);
  return Number(rows[0]?.doc.id);
}

describe("memory with vectors", () => {
  test("a question worded unlike the stored turn is recalled by its vector only; words still count", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const cat = turn(store, "ann", "s1", "my cat Mittens likes salmon");
    const car = turn(store, "ann", "s2", "the car needs new tyres before winter");
    store.memory.vectors.put("m1", [
      { id: cat, vector: toward(0) },
      { id: car, vector: toward(4) },
    ]);
    const question = "which fish feeds our kitten";
    expect(store.memory.search("ann", question, 3, "now")).toEqual([]);
    const hits = store.memory.search("ann", question, 3, "now", { fingerprint: "m1", vector: toward(0, 2) });
    expect(hits[0]?.doc.text).toContain("Mittens");
    // Both rows have vectors: both come back, the nearer first.
    expect(hits.map((h) => Number(h.doc.id))).toEqual([cat, car]);
    // A word match and the nearer vector agreeing put that row first.
    const both = store.memory.search("ann", "tyres", 2, "now", { fingerprint: "m1", vector: toward(4) });
    expect(Number(both[0]?.doc.id)).toBe(car);
    store.close();
  });

  test("a vector hit whose row is another user's by the time it is read is left out (its id taken since)", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const mine = turn(store, "ann", "s1", "alpha one");
    const theirs = turn(store, "bob", "b1", "bob's private note");
    // The vector search checked its scope in its own statement; between it and the read of the
    // rows it named, an erase and a new row (another thread's commit) may give its id to another user.
    const nearest = spyOn(store.memory.vectors, "nearest").mockReturnValue([
      { id: theirs, score: 0.9 },
      { id: mine, score: 0.8 },
    ]);
    try {
      const hits = store.memory.search("ann", "zzz", 5, "now", { fingerprint: "m1", vector: toward(1) });
      expect(hits.map((h) => Number(h.doc.id))).toEqual([mine]);
      expect(JSON.stringify(hits)).not.toContain("private");
    } finally {
      nearest.mockRestore();
      store.close();
    }
  });

  test("another model's vectors are never used; another user's rows and this session are out of scope", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const mine = turn(store, "ann", "s1", "alpha one");
    const here = turn(store, "ann", "now", "alpha here");
    const theirs = turn(store, "bob", "b1", "alpha bob");
    store.memory.vectors.put("m1", [
      { id: mine, vector: toward(1) },
      { id: here, vector: toward(1) },
      { id: theirs, vector: toward(1) },
    ]);
    const near = { fingerprint: "m1", vector: toward(1) };
    expect(store.memory.search("ann", "zzz", 5, "now", near).map((h) => Number(h.doc.id))).toEqual([mine]);
    expect(store.memory.search("ann", "zzz", 5, "now", { ...near, fingerprint: "m2" })).toEqual([]);
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 3, total: 3 });
    expect(store.memory.vectors.lacking("m2", 10).map((r) => r.id)).toEqual([theirs, here, mine]);
    expect(store.memory.vectors.lacking("m1", 10)).toEqual([]);
    // Re-embedded by another model: the row's vector is replaced.
    store.memory.vectors.put("m2", [{ id: mine, vector: toward(1) }]);
    expect(store.memory.vectors.counts("m1").embedded).toBe(2);
    expect(store.memory.search("ann", "zzz", 5, "now", near)).toEqual([]);
    store.close();
  });

  test("a vector for a row deleted since it was read is not stored", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const id = turn(store, "ann", "s1", "short lived");
    store.memory.vectors.put("m1", [{ id: id + 100, vector: toward(1) }]);
    expect(store.memory.vectors.counts("m1").embedded).toBe(0);
    store.close();
  });

  test("another core's adds and erases reach this core's index; an erased row never comes back", async () => {
    using dir = tmpdir();
    const here = Store.open(dir.path);
    const other = Store.open(dir.path);
    const a = turn(here, "ann", "s1", "first note");
    here.memory.vectors.put("m1", [{ id: a, vector: toward(2) }]);
    const q = { fingerprint: "m1", vector: toward(2) };
    expect(here.memory.search("ann", "zzz", 5, "now", q).map((h) => Number(h.doc.id))).toEqual([a]);
    const b = turn(other, "ann", "s2", "second note");
    other.memory.vectors.put("m1", [{ id: b, vector: toward(2, 3, 0.1) }]);
    expect(here.memory.search("ann", "zzz", 5, "now", q).map((h) => Number(h.doc.id))).toEqual([a, b]);
    await other.deleteSession("ann", "s2");
    expect(here.memory.search("ann", "zzz", 5, "now", q).map((h) => Number(h.doc.id))).toEqual([a]);
    // The freed id reused by a new row without a vector: the index's old entry must not surface it.
    const c = turn(other, "ann", "s3", "third note");
    expect(here.memory.search("ann", "zzz", 5, "now", q).map((h) => Number(h.doc.id))).toEqual([a]);
    expect(c).toBeGreaterThan(0);
    await other.deleteUser("ann");
    expect(here.memory.search("ann", "note", 5, "now", q)).toEqual([]);
    expect(here.memory.vectors.counts("m1")).toEqual({ embedded: 0, total: 0 });
    other.close();
    here.close();
  });
});

describe("the index of a large memory", () => {
  test("a search reads only part of a backlog itself; the rest comes in slices, and nothing wrong meanwhile", async () => {
    using dir = tmpdir();
    const { db, fts } = openStore(dir.path);
    const ids: number[] = [];
    const insert = db.query(
      "INSERT INTO memory (user_id, session_id, source, text, at) VALUES ('ann', 's', 'x', 'note', 0) RETURNING id",
    );
    for (let i = 0; i < 7; i++) ids.push((insert.get() as { id: number }).id);
    const writer = new MemoryVectors(db);
    // The last row is the nearest to the query; it is read last.
    writer.put(
      "m1",
      ids.map((id, i) => ({ id, vector: toward(i === 6 ? 3 : 5) })),
    );
    const vectors = new MemoryVectors(db, { syncRows: 2, sliceRows: 2 });
    const scope = { sql: "m.user_id = $u", params: { u: "ann" }, owners: ["ann", ""] };
    const q = { fingerprint: "m1", vector: toward(3) };
    const partial = vectors.nearest(q, scope, 7).map((r) => r.id);
    expect(partial.length).toBeLessThan(7);
    for (const id of partial) expect(ids).toContain(id);
    await vectors.warm("m1");
    const whole = vectors.nearest(q, scope, 7).map((r) => r.id);
    expect(whole).toHaveLength(7);
    expect(whole[0]).toBe(ids[6]);
    expect(fts).toBe(true);
    db.close(false);
  });
});

describe("a scope that leaves few candidates", () => {
  test("the search widens until the scope's rows are found, and stops widening at its bound", () => {
    using dir = tmpdir();
    const { db } = openStore(dir.path);
    const insert = db.query(
      "INSERT INTO memory (user_id, session_id, source, text, at) VALUES ('ann', ?, 'x', 'note', 0) RETURNING id",
    );
    const vectors = new MemoryVectors(db);
    // 40 rows of the excluded session nearer the query than the one row in scope.
    const near = Array.from({ length: 40 }, () => (insert.get("now") as { id: number }).id);
    const far = (insert.get("old") as { id: number }).id;
    vectors.put("m1", [
      ...near.map((id) => ({ id, vector: toward(3) })),
      { id: far, vector: toward(3, 6, 0.9) },
    ]);
    const scope = { sql: "m.session_id != $skip", params: { skip: "now" }, owners: ["ann"] };
    const q = { fingerprint: "m1", vector: toward(3) };
    // 1 candidate, then 4, 16, 64: found once 64 are taken.
    expect(vectors.nearest(q, scope, 1, 1).map((r) => r.id)).toEqual([far]);
    // With 70 nearer rows out of scope, 64 candidates never reach it: the widening is bounded.
    const more = Array.from({ length: 30 }, () => (insert.get("now") as { id: number }).id);
    vectors.put(
      "m1",
      more.map((id) => ({ id, vector: toward(3) })),
    );
    expect(vectors.nearest(q, scope, 1, 1)).toEqual([]);
    expect(vectors.nearest(q, scope, 1).map((r) => r.id)).toEqual([far]);
    db.close(false);
  });

  test("the chat's own session is left out by the scan itself: a long conversation needs no widening", () => {
    // One long chat is the common case: every nearest row is its own, which recall leaves out.
    using dir = tmpdir();
    const { db } = openStore(dir.path);
    const insert = db.query(
      "INSERT INTO memory (user_id, session_id, source, text, at) VALUES ('ann', ?, 'x', 'note', 0) RETURNING id",
    );
    const vectors = new MemoryVectors(db);
    const own = Array.from({ length: 80 }, () => (insert.get("now") as { id: number }).id);
    const far = (insert.get("old") as { id: number }).id;
    vectors.put("m1", [
      ...own.map((id) => ({ id, vector: toward(3) })),
      { id: far, vector: toward(3, 6, 0.9) },
    ]);
    const scope = {
      sql: "m.session_id != $skip",
      params: { skip: "now" },
      owners: ["ann", ""],
      skipOwner: ownerKey("ann", "now"),
    };
    // One candidate, no widening: 80 nearer rows of the skipped session are past the widest (64).
    expect(vectors.nearest({ fingerprint: "m1", vector: toward(3) }, scope, 1, 1).map((r) => r.id)).toEqual([
      far,
    ]);
    db.close(false);
  });
});
