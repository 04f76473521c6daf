import type { Database } from "bun:sqlite";
import { ftsSecureDeleteSet } from "./fts-forget.ts";

/** Whether this SQLite's FTS5 has 'secure-delete' (3.42.0 and later). */
export function secureDeleteKnown(db: Database): boolean {
  const { v } = db.query("SELECT sqlite_version() AS v").get() as { v: string };
  const [major = 0, minor = 0] = v.split(".").map(Number);
  return major > 3 || (major === 3 && minor >= 42);
}

const NOTE = "fts_optimize_after_delete";

/**
 * FTS5 keeps a deleted row's terms until segments merge unless told otherwise (SQLite
 * 3.42+); older libraries (an older macOS) get an 'optimize' after each delete instead, noted
 * in meta once: tried and noted at every open, that write met another core's write lock (a long
 * erase) and openStore waited it out on the main loop, then failed. `known`: tests.
 */
export function enableFtsSecureDelete(db: Database, known = secureDeleteKnown(db)): void {
  if (!known) {
    if (db.query("SELECT 1 FROM meta WHERE key = ? AND value = '1'").get(NOTE) === null) note(db);
    return;
  }
  for (const table of ["messages_fts", "memory_fts"]) {
    try {
      db.run(`INSERT INTO ${table}(${table}, rank) VALUES ('secure-delete', 1)`);
    } catch {
      note(db);
    }
  }
}

function note(db: Database): void {
  db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", [NOTE]);
}

/**
 * Secure-delete found on (a newer SQLite turned it on): the note goes, else every delete paid an
 * FTS5 'optimize' (erase.ts `settleErase`) for good. Only after that erase's 'optimize': words a
 * delete made before secure-delete was on left in the segments (its own optimize cut off by a
 * kill) are out of reach of secure-delete, and dropped at the open the note left them for good.
 * Only where this SQLite knows secure-delete: an older one honours no such setting.
 */
export function forgetOptimizeNote(db: Database, known = secureDeleteKnown(db)): void {
  if (!known || !ftsSecureDeleteSet(db)) return;
  try {
    db.run("DELETE FROM meta WHERE key = ?", [NOTE]);
  } catch {} // A lock held elsewhere: the next erase's optimize, then this again.
}
