import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { enableFtsSecureDelete, forgetOptimizeNote } from "../../../src/store/db/fts-secure-delete.ts";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { settleErase } from "../../../src/store/erase.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A SQLite below 3.42 (macOS 13's system library) has no FTS5 secure-delete: every open tried
// it, then wrote meta's note again, so a core opening while another held the write lock (a long
// erase) met SQLITE_BUSY and openStore retried it for 3 s on the main loop, then failed.
test("a SQLite without secure-delete, its note already kept: the open writes nothing", () => {
  using dir = tmpdir();
  const opened = openStore(dir.path);
  const db = opened.db;
  db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_optimize_after_delete', '1')");
  // As such a library leaves it: secure-delete not on in the indexes' config.
  for (const t of ["messages_fts", "memory_fts"])
    db.run(`INSERT INTO ${t}(${t}, rank) VALUES ('secure-delete', 0)`);
  const other = new Database(join(dir.path, DB_FILE));
  other.run("BEGIN IMMEDIATE");
  try {
    expect(() => enableFtsSecureDelete(db, false)).not.toThrow();
  } finally {
    other.run("ROLLBACK");
    other.close();
  }
  expect(db.query("SELECT value FROM meta WHERE key = 'fts_optimize_after_delete'").get()).toEqual({
    value: "1",
  });
  db.close();
});

test("without secure-delete and no note yet: noted once", () => {
  using dir = tmpdir();
  const db = openStore(dir.path).db;
  db.run("DELETE FROM meta WHERE key = 'fts_optimize_after_delete'");
  enableFtsSecureDelete(db, false);
  expect(db.query("SELECT value FROM meta WHERE key = 'fts_optimize_after_delete'").get()).toEqual({
    value: "1",
  });
  db.close();
});

// A database noted on an older SQLite (macOS 13's), opened after an update brought one with
// secure-delete: the note stayed for good, and every delete then paid an FTS5 'optimize' too.
test("secure-delete found on with this SQLite: the note goes at the next erase; below 3.42 it stays", () => {
  using dir = tmpdir();
  const first = openStore(dir.path).db;
  first.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_optimize_after_delete', '1')");
  first.close();
  const db = openStore(dir.path).db;
  settleErase(db);
  expect(db.query("SELECT value FROM meta WHERE key = 'fts_optimize_after_delete'").get()).toBeNull();
  db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_optimize_after_delete', '1')");
  forgetOptimizeNote(db, false);
  expect(db.query("SELECT value FROM meta WHERE key = 'fts_optimize_after_delete'").get()).toEqual({
    value: "1",
  });
  db.close();
});

// A delete on the older SQLite whose 'optimize' never ran (the core killed between the delete's
// commit and it) kept the erased words in the index's segments; secure-delete, once on, does not
// reach those. The open dropped the note, so no later erase merged them out: erased text stayed.
test("the note goes only with a last 'optimize': words an earlier delete left are merged out", () => {
  using dir = tmpdir();
  const first = openStore(dir.path).db;
  first.run("INSERT INTO messages_fts(messages_fts, rank) VALUES ('secure-delete', 0)");
  first.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_optimize_after_delete', '1')");
  first.run("INSERT INTO messages_fts(rowid, content) VALUES (999, 'zqxjerasedword')");
  first.run(
    "INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', 999, 'zqxjerasedword')",
  );
  const kept = (db: Database) =>
    (db.query("SELECT block FROM messages_fts_data").all() as { block: Uint8Array }[]).some((r) =>
      Buffer.from(r.block).includes("zqxjerasedword"),
    );
  expect(kept(first)).toBe(true);
  first.close();
  const db = openStore(dir.path).db;
  settleErase(db);
  expect(kept(db)).toBe(false);
  expect(db.query("SELECT value FROM meta WHERE key = 'fts_optimize_after_delete'").get()).toBeNull();
  db.close();
});
