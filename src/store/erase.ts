import type { Database } from "bun:sqlite";
import { logger } from "../util/logger.ts";
import { forgettingRows, indexedRows, roomToMerge } from "./db/fts-forget.ts";
import { forgetOptimizeNote } from "./db/fts-secure-delete.ts";
import { BUSY_TIMEOUT_MS } from "./db/open.ts";
import { withTempFiles } from "./db/temp-dir.ts";
import { recordErasure } from "./erasures.ts";
import { dropUnitRecords } from "./import-v01-records.ts";
import { dropCitations } from "./source-names.ts";

/**
 * Deleting for good (docs/protocol.md#conversations-sessions-and-usersdelete, `users.delete`):
 * `secure_delete` zeroes the freed parts of the database's pages and FTS5's `secure-delete` takes
 * the words out of its index at once; what is left is the write-ahead log, which still holds the
 * pages as they were until a checkpoint copies them back and truncates it. Another process reading
 * at that moment can stop the truncation; it is tried again a few times, then every
 * SCRUB_RETRY_MS until it is done (and at the next open, for a core that died owing it).
 */
const TRUNCATE_TRIES = 5;
export const SCRUB_RETRY_MS = 500;

export function eraseSession(db: Database, userId: string, sessionId: string, at: number): boolean {
  return eraseRows(db, userId, sessionId, at) > 0;
}

/** Every session, message, checkpoint, memory entry and document of the user; returns the sessions removed. */
export function eraseUser(db: Database, userId: string, at: number): number {
  return eraseRows(db, userId, undefined, at);
}

/**
 * The erase in one transaction, then settled. A rewrite of the pages is owed only when a row
 * went (a `users.delete` of a user with nothing, which hosts send to be sure, moves no cell and
 * would otherwise rewrite the whole database), and is done now with one owed from before.
 */
function eraseRows(db: Database, userId: string, sessionId: string | undefined, at: number): number {
  const removed = db
    .transaction(() => {
      recordErasure(db, userId, sessionId, at);
      const before = changesSoFar(db);
      const sessions = deleteRows(db, userId, sessionId);
      if (changesSoFar(db) > before) oweRewrite(db);
      return sessions;
    })
    .immediate();
  settleErase(db, rewriteOwed(db));
  return removed;
}

/** The rows this connection has changed since it opened (triggers' and cascades' included). */
export function changesSoFar(db: Database): number {
  return (db.query("SELECT total_changes() AS n").get() as { n: number }).n;
}

/**
 * The user's rows (of one session, or all), in the caller's transaction; the sessions removed.
 * Messages and checkpoints go with their session (foreign keys, ON DELETE CASCADE).
 */
export function deleteRows(db: Database, userId: string, sessionId?: string): number {
  const where = sessionId === undefined ? "user_id = ?" : "user_id = ? AND session_id = ?";
  const args = sessionId === undefined ? [userId] : [userId, sessionId];
  // The 0.1 import's records name them too (store/import-v01-records.ts).
  if (hasTable(db, "meta")) dropUnitRecords(db, userId, sessionId);
  return forgettingRows(db, indexedRows(db, `WHERE ${where}`, ...args), () => deleteRowsOf(db, where, args));
}

function deleteRowsOf(db: Database, where: string, args: string[]): number {
  if (args.length === 2) dropCitations(db, args[0] as string, args[1] as string);
  db.query(`DELETE FROM memory WHERE ${where}`).run(...args);
  // Their documents (a session's attachments; a user's all); a copy set aside before the
  // documents table existed has none.
  if (db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'documents'").get())
    db.query(`DELETE FROM documents WHERE ${where}`).run(...args);
  db.query(`DELETE FROM session_leases WHERE ${where}`).run(...args);
  // Images (docs/protocol.md#images) go with their session too; by user here as every table
  // holding a user's data is. A copy set aside before they existed has no such table.
  if (hasTable(db, "attachments")) {
    db.query(`DELETE FROM attachment_data WHERE id IN (SELECT id FROM attachments WHERE ${where})`).run(
      ...args,
    );
    db.query(`DELETE FROM attachments WHERE ${where}`).run(...args);
  }
  return db.query(`DELETE FROM sessions WHERE ${where}`).run(...args).changes;
}

export function hasTable(db: Database, name: string): boolean {
  return db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== null;
}

/** Rows removed per step when erasing on a full disk: a step's log stays far under the reserve. */
const STEP_ROWS = 32;

/**
 * The same erase on a full disk (store/disk-reserve.ts has freed its room): the log emptied
 * first, the erase recorded, then the rows a few at a time, each step its own transaction and
 * the log emptied after it, so the log never needs more room than one step's pages. A failure
 * midway leaves the erase recorded (no turn writes the session back) and the rest to a retry.
 * Each step is recorded as an erase too: a history read between two steps (this core's cache,
 * store/session-histories.ts, keyed by the newest erase's number) is never served or kept once a
 * later step took more of it, the erase failing midway or not. Its row replaces the step before's
 * (same ids, a higher number, so every check reads it as before): one row per erase, not one per
 * 32 rows erased, which each step's prune would scan and whose count would tell the erase's size.
 */
export function eraseInSteps(
  db: Database,
  userId: string,
  sessionId: string | undefined,
  at: number,
): number {
  truncateWal(db);
  let recorded: number | undefined;
  const step = <T>(rows: () => T): T =>
    db
      .transaction(() => {
        const id = recordErasure(db, userId, sessionId, at);
        if (recorded !== undefined) db.query("DELETE FROM erasures WHERE id = ?").run(recorded);
        const result = rows();
        recorded = id;
        return result;
      })
      .immediate();
  // No room to rewrite the pages here: owed to the next erase or open with room (rewritePages).
  step(() => oweRewrite(db));
  const where = sessionId === undefined ? "user_id = ?" : "user_id = ? AND session_id = ?";
  const args = sessionId === undefined ? [userId] : [userId, sessionId];
  // An image's bytes are kept in parts of 1 MB: two a step, well under the 4 MiB reserve.
  const ofAttachment = sessionId === undefined ? "a.user_id = ?" : "a.user_id = ? AND a.session_id = ?";
  for (let removed = 1; removed > 0 && hasTable(db, "attachment_data"); ) {
    truncateWal(db);
    removed = step(
      () =>
        db
          .query(
            `DELETE FROM attachment_data WHERE rowid IN (SELECT d.rowid FROM attachment_data d
             JOIN attachments a ON a.id = d.id WHERE ${ofAttachment} LIMIT 2)`,
          )
          .run(...args).changes,
    );
  }
  const steps: [string, number][] = [
    ["attachments", STEP_ROWS],
    ["memory", STEP_ROWS],
    ["messages", STEP_ROWS],
  ];
  for (const [table, rows] of steps) {
    if (!hasTable(db, table)) continue;
    const batch = db.query(
      `DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE ${where} LIMIT ${rows})`,
    );
    for (let removed = 1; removed > 0; ) {
      truncateWal(db);
      removed = step(() => batch.run(...args).changes);
    }
  }
  // Other answers' citations of the session too: a page rewritten per answer, which for a
  // session many answers cite is more than one step's log may take (the last step drops any a
  // turn stored meanwhile).
  for (let dropped = sessionId === undefined ? 0 : 1; dropped > 0; ) {
    truncateWal(db);
    dropped = step(() => dropCitations(db, userId, sessionId as string, STEP_ROWS));
  }
  truncateWal(db);
  const removed = step(() => deleteRows(db, userId, sessionId));
  settleErase(db);
  return removed;
}

/**
 * The index purged of the deleted words where FTS5 cannot do it itself, and the log emptied.
 * `rewrite`: an explicit erase (sessions, users, documents delete): every page written anew
 * first (rewritePages); false when that was wanted and could not be done.
 */
export function settleErase(db: Database, rewrite = false): boolean {
  const optimize = db.query("SELECT value FROM meta WHERE key = 'fts_optimize_after_delete'").get() as {
    value: string;
  } | null;
  if (optimize?.value === "1") {
    // A SQLite without FTS5 secure-delete: merging the segments drops the deleted rows' words.
    for (const t of ["messages_fts", "memory_fts"]) db.run(`INSERT INTO ${t}(${t}) VALUES ('optimize')`);
    forgetOptimizeNote(db);
  }
  // After the merge: its own writes move the index's cells as the deletes moved the rows'.
  const rewritten = !rewrite || rewritePages(db);
  if (rewrite && rewritten) db.run("DELETE FROM meta WHERE key = 'rewrite_owed'");
  truncateWal(db);
  return rewritten;
}

/**
 * Marks, in the erase's own transaction, that the pages still need their rewrite: a core killed
 * between the erase's commit and its VACUUM, a full disk's erase (eraseInSteps) or one without
 * room for the copy leave it owed, and the next explicit erase or open with room does it.
 */
export function oweRewrite(db: Database): void {
  db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('rewrite_owed', '1')");
}

/** Whether an erase owes its pages' rewrite (oweRewrite). */
export function rewriteOwed(db: Database): boolean {
  return db.query("SELECT 1 FROM meta WHERE key = 'rewrite_owed'").get() !== null;
}

/** A rewrite an erase owes (oweRewrite), then the log emptied; false while it stays owed. */
export function settleOwed(db: Database): boolean {
  if (!rewriteOwed(db)) return true;
  const done = rewritePages(db);
  if (done) db.run("DELETE FROM meta WHERE key = 'rewrite_owed'");
  truncateWal(db);
  return done;
}

/**
 * docs/agent.md "Privacy": a delete that makes SQLite rebalance a b-tree rebuilds the pages from
 * their cells without zeroing the unused space of a page that stays in use, so a cell moved there
 * before its own row was deleted leaves a copy that `secure_delete` (freed cells and freed pages
 * only) never reaches: erased text, or an erased user's id in an index. VACUUM writes every page
 * anew from the live rows (all tables keep their rowids: each has an INTEGER PRIMARY KEY, which
 * FTS5's external content relies on). Its copy (only what the erase kept) is a temporary file in
 * the data folder (store/db/temp-dir.ts) and the log takes the whole database until truncateWal
 * empties it: twice the database on one disk, the room the index merge needs; without it the
 * erase stands and the rewrite stays owed (oweRewrite).
 * Cost: ~10 ms a MB here, the whole database (bench/erase.ts).
 */
function rewritePages(db: Database): boolean {
  if (!roomToMerge(db)) {
    logger.warn(
      "not enough free disk for a copy of the database after a delete: its pages are not rewritten yet (bytes of the deleted rows may stay in unused parts of pages still in use); the next delete or start with room does it",
    );
    return false;
  }
  // Another connection's write (this core's lease renewals and releases, another core on the
  // folder) is waited out as the erase's own transaction is (chunk-worker.ts): at the short busy
  // wait an erase runs with, a VACUUM meeting one failed and left the rewrite owed.
  const deadline = Date.now() + REWRITE_BUSY_WAIT_MS;
  for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
    try {
      withTempFiles(db, () => db.run("VACUUM"));
      return true;
    } catch (err) {
      const busy = /^SQLITE_BUSY/.test((err as { code?: string }).code ?? "");
      if (busy && Date.now() < deadline) {
        Bun.sleepSync(wait);
        continue;
      }
      logger.warn(`the database's pages could not be rewritten after a delete: ${(err as Error).message}`);
      return false;
    }
  }
}

/** How long an erase's page rewrite waits out another connection's write lock. */
const REWRITE_BUSY_WAIT_MS = 5000;

/** Copies the log into the database and empties it; false when a reader kept it from finishing (then retried). */
export function truncateWal(db: Database): boolean {
  for (let i = 0; i < TRUNCATE_TRIES; i++) {
    if (checkpointed(db)) return true;
    Bun.sleepSync(20);
  }
  logger.warn(
    `the database's write-ahead log could not be emptied after a delete (another process reads it); tried again every ${SCRUB_RETRY_MS} ms, and by the next core to open it`,
  );
  oweScrub(db);
  return false;
}

/**
 * One try, without waiting on a reader: at open (a core that died after an erase, or with a
 * retry owed, left the log as it was) and for the retries; a reader in the way leaves it owed.
 */
export function scrubWal(db: Database): boolean {
  db.run("PRAGMA busy_timeout = 0");
  try {
    if (checkpointed(db)) return true;
  } finally {
    db.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
  oweScrub(db);
  return false;
}

/** Stops the retries (the database is closing: its close empties the log itself). */
export function forgetScrub(db: Database): void {
  clearInterval(owed.get(db));
  owed.delete(db);
}

function checkpointed(db: Database): boolean {
  const r = db.query("PRAGMA wal_checkpoint(TRUNCATE)").get() as { busy: number } | null;
  const done = r !== null && r.busy === 0;
  if (done && owed.has(db)) {
    forgetScrub(db);
    logger.info("the database's write-ahead log is emptied");
  }
  return done;
}

/** Databases whose log still holds what a delete took out of them: retried on a timer. */
const owed = new Map<Database, Timer>();

function oweScrub(db: Database): void {
  if (owed.has(db)) return;
  const timer = setInterval(() => {
    try {
      scrubWal(db);
    } catch (err) {
      // Closed: nothing left to retry on. Anything else (a disk error) is tried again.
      if (err instanceof RangeError) forgetScrub(db);
    }
  }, SCRUB_RETRY_MS);
  timer.unref?.();
  owed.set(db, timer);
}
