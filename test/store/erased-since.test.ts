import type { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { editedSince, erasedSince, erasureMark, recordErasure } from "../../src/store/erasures.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * `erasedSince` and `editedSince` answer "none" from the newest erase's number alone when no erase
 * came after the mark (the warm chat's way: docs/performance.md). What that must not hide: an
 * erase or edit after the mark, nor one whose row a prune already dropped.
 */
test("the erase checks see every erase after a mark, pruned ones too, and none before it", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  try {
    const db = (store as unknown as { db: Database }).db;
    const at = Date.now();
    const before = erasureMark(db);
    expect(erasedSince(db, "u", "s", before)).toBe(false);
    expect(editedSince(db, "u", "s", before)).toBe(false);

    recordErasure(db, "u", "s", at, true); // an edit of s's tail
    const edited = erasureMark(db);
    expect(edited).toBeGreaterThan(before);
    expect(erasedSince(db, "u", "s", before)).toBe(false);
    expect(editedSince(db, "u", "s", before)).toBe(true);
    expect(editedSince(db, "u", "s", edited)).toBe(false);

    recordErasure(db, "u", "other", at); // another session's erase: not s's
    expect(erasedSince(db, "u", "s", edited)).toBe(false);
    expect(editedSince(db, "u", "s", edited)).toBe(false);
    recordErasure(db, "u", "s", at);
    expect(erasedSince(db, "u", "s", edited)).toBe(true);

    // Every row pruned: a turn begun before them cannot be told apart, so it counts as erased.
    const now = erasureMark(db);
    db.query("DELETE FROM erasures").run();
    db.query(
      "INSERT INTO meta (key, value) VALUES ('erasures_pruned_through', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    ).run(String(now));
    expect(erasedSince(db, "u", "s", before)).toBe(true);
    expect(editedSince(db, "u", "s", before)).toBe(true);
    expect(erasedSince(db, "u", "s", now)).toBe(false);
    expect(editedSince(db, "u", "s", now)).toBe(false);
  } finally {
    store.close();
  }
});
