import { Database } from "bun:sqlite";
import { closeSync, fstatSync, lstatSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { CoreError } from "../protocol/errors.ts";
import { logger } from "../util/logger.ts";
import { namesIn } from "../util/names-in.ts";
import { refuseLink } from "../util/private-fs.ts";
import { fsProblemText } from "./data-dir-problem.ts";
import { emptyIndexTables, indexOthersOut } from "./db/fts-forget.ts";
import { ASIDE_INFIX, BUSY_TIMEOUT_MS, DB_FILE, integrityProblem } from "./db/open.ts";
import { refuseOddSideFiles } from "./db/ownership.ts";
import { useMemoryForTemp } from "./db/temp-dir.ts";
import { deleteDocumentRows } from "./document-store.ts";
import { changesSoFar, deleteRows, hasTable, settleErase } from "./erase.ts";
import { openToZeroChecked, zeroFileSync, zeroOpenSync } from "./scrub-file.ts";

/** What an erase did with one database set aside after damage (docs/protocol.md, users.delete). */
export type CopyOutcome =
  | { path: string; outcome: "scrubbed"; deleted_sessions: number }
  | { path: string; outcome: "removed"; problem: string };

/**
 * The databases set aside under `dataDir` (`local-ai.db.corrupt-<time>`), oldest first. A folder
 * so named is none (the core sets a file aside): its removal threw, and every delete with it.
 */
export function setAsideCopies(dataDir: string): string[] {
  return namesIn(dataDir)
    .filter((n) => n.startsWith(`${DB_FILE}${ASIDE_INFIX}`) && !/-(wal|shm|journal)$/.test(n))
    .sort()
    .map((n) => join(dataDir, n))
    .filter((path) => !isFolder(path));
}

function isFolder(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch {
    return false; // Gone meanwhile, or unreadable: the scrub says what it meets.
  }
}

/**
 * The user's rows (one session's, or all) erased from every copy set aside, as from the live
 * database (docs/agent.md, The store): a copy that passes `quick_check` is scrubbed with
 * `secure_delete` and its log emptied. One that cannot be scrubbed (damaged, unreadable, or the
 * scrub fails) cannot be made to forget only this user: it is overwritten and removed whole.
 */
export function eraseFromCopies(dataDir: string, userId: string, sessionId?: string): CopyOutcome[] {
  return eraseInCopies(dataDir, (db) => {
    // A copy an earlier version set aside keeps erased ids as given (before migration 6); no
    // turn ever checks a copy's record, so it goes whole.
    if (hasTable(db, "erasures")) db.run("DELETE FROM erasures");
    const removed = deleteRows(db, userId, sessionId);
    // Its messages index as an earlier version may have built it, tool results in it, which no
    // delete takes out: built anew (store/db/fts-forget.ts), as the live one is by the open's one-time check (store/db/open.ts).
    if (hasTable(db, "messages_fts_docsize")) indexOthersOut(db, true);
    emptyUntriggered(db);
    return removed;
  });
}

/**
 * A copy's indexes whose triggers an earlier core dropped where it ran without FTS5: the erased
 * rows' words still in them, emptied as the open now does there (store/db/fts-forget.ts
 * `emptyIndexTables`; an open where FTS5 is builds them anew).
 */
function emptyUntriggered(db: Database): void {
  const triggered = db
    .query("SELECT 1 FROM sqlite_schema WHERE type = 'trigger' AND name = 'memory_fts_delete'")
    .get();
  if (hasTable(db, "memory_fts_docsize") && !triggered) emptyIndexTables(db);
}

/** One document of the user erased from every copy set aside, the same way (`documents.delete`). */
export function eraseDocumentFromCopies(dataDir: string, userId: string, documentId: string): CopyOutcome[] {
  return eraseInCopies(dataDir, (db) => {
    const removed = deleteDocumentRows(db, userId, documentId) ? 1 : 0;
    emptyUntriggered(db);
    return removed;
  });
}

/** `remove` run in each copy set aside (its count: `deleted_sessions`), else the copy removed whole. */
function eraseInCopies(dataDir: string, remove: (db: Database) => number): CopyOutcome[] {
  return setAsideCopies(dataDir).map((path) => {
    const logs = holdLogs(path);
    try {
      return { path, outcome: "scrubbed" as const, deleted_sessions: scrub(path, remove) };
    } catch (err) {
      const problem = (err as Error).message;
      logger.warn(
        `the set-aside database ${path} could not be scrubbed (${problem}); removed so nothing erased stays in it`,
      );
      // Before the removal, which may fail the erase: an unlinked log has no second chance.
      for (const fd of logs) zeroHeld(fd);
      removeWhole(path);
      return { path, outcome: "removed" as const, problem };
    } finally {
      for (const fd of logs) closeSync(fd);
    }
  });
}

/**
 * The copy's journal and log held open before SQLite's own open, which unlinks them unzeroed
 * where the copy is not a database or is damaged: a copy that goes whole has them zeroed through
 * these (removeWhole finds them gone; one still named is its to zero).
 */
function holdLogs(path: string): number[] {
  const held: number[] = [];
  for (const file of [`${path}-wal`, `${path}-journal`]) {
    // openToZeroChecked throws nothing: no descriptor held so far is left open by a throw.
    const fd = openToZeroChecked(file);
    if (typeof fd === "number") held.push(fd);
  }
  return held;
}

/** A held log zeroed once it has no name left (removeWhole zeroed and removed one it found). */
function zeroHeld(fd: number): void {
  try {
    if (fstatSync(fd).nlink === 0) zeroOpenSync(fd, 0);
  } catch (err) {
    logger.warn(`a set-aside database's log could not be zeroed: ${(err as Error).message}`);
  }
}

function scrub(path: string, remove: (db: Database) => number): number {
  // SQLite would open the link's target, and the fallback below would zero it: the core never
  // sets a copy aside as a link, so one named so is removed (the link only) as unscrubbable.
  refuseLink(path);
  // A FIFO there or beside it held SQLite's open, and the store's thread, for good (ownership.ts):
  // a FIFO of mode 0444, SQLite's read-write open refused, tried read-only. Removed whole.
  if (!lstatSync(path).isFile()) throw new Error(`${path} is not a regular file`);
  refuseOddSideFiles(path);
  const db = new Database(path, { readwrite: true, create: false, strict: true });
  try {
    db.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    db.run("PRAGMA foreign_keys = ON");
    db.run("PRAGMA secure_delete = ON");
    useMemoryForTemp(db);
    const problem = integrityProblem(db);
    if (problem) throw new Error(problem);
    const before = changesSoFar(db);
    const removed = db.transaction(() => remove(db)).immediate();
    // Without its pages rewritten the copy may keep the rows' bytes (erase.ts rewritePages):
    // then it cannot be scrubbed, and goes whole like a damaged one. A copy the erase took
    // nothing from is not rewritten (as the live database, erase.ts eraseRows): every delete
    // rewrote every copy, and one without room went whole though it held nothing erased.
    const rewrite = changesSoFar(db) > before;
    if (!settleErase(db, rewrite)) throw new Error("its pages could not be rewritten after the delete");
    return removed;
  } finally {
    db.close(false);
  }
}

/** The copy, its log and shared memory overwritten with zeros where they can be, then unlinked. */
function removeWhole(path: string): void {
  for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) {
    // lstat: a dangling link is there too, and goes.
    if (!lstatSync(file, { throwIfNoEntry: false })) continue;
    try {
      zeroFileSync(file);
    } catch (err) {
      // Another file renamed onto the name after each open: unlinked unchecked, the one there
      // last went unzeroed. Left, and the erase fails (a session's or document's before its live
      // rows go), to be sent again.
      const code = (err as { code?: string }).code;
      if (code === "ECHANGED") throw copyLeft(file, "ECHANGED");
      // Removed all the same (a name kept keeps the words readable), said as scrub-tree.ts does:
      // silent, the user never learnt the erased rows' blocks were left on the disk.
      if (code !== "ENOENT")
        logger.warn(
          `${file} could not be zeroed before its removal (${code ?? (err as Error).message}): removed all the same`,
        );
    }
    try {
      rmSync(file, { force: true });
    } catch (err) {
      // Plain, it crossed the store's thread without its path: a bare "internal error".
      throw copyLeft(file, (err as { code?: string }).code ?? "unknown");
    }
  }
}

function copyLeft(file: string, problem: string): CoreError {
  return new CoreError(
    "internal_error",
    `the set-aside database file ${file} could not be erased: ${fsProblemText(problem)}; the delete stopped there: send it again once that is fixed`,
    { key: "app.data_dir", path: dirname(file), file, problem },
  );
}
