import type { Database } from "bun:sqlite";
import { closeSync, constants, lstatSync } from "node:fs";
import { CoreError } from "../../protocol/errors.ts";
import { openPrivateFile, refuseLink, tightenExistingFile } from "../../util/private-fs.ts";

/**
 * Whose database is this (docs/agent.md, The store)? The core opens `local-ai.db` only when it
 * is its own: never through a link (SQLite would write into the link's target), and never a
 * database another program made, which would otherwise get our tables added and its journal
 * mode changed.
 */

/** `PRAGMA application_id` of local-ai's database: "LAI1". */
export const APPLICATION_ID = 0x4c414931;

/** Tables every local-ai database has had since schema 1, before it carried an application_id. */
const OUR_TABLES = ["meta", "sessions", "messages"];

/**
 * Refuses a database whose file, WAL or shared-memory file is a link or a folder, and creates a
 * missing one owner-only (so its WAL and shared memory, which take its mode, are owner-only too);
 * one found with group or other bits is tightened, its WAL and shared memory with it.
 * Each name is looked at, then opened by SQLite by name: something planted between the two is not
 * seen. The window is the database's own (its link check) and cannot be closed from here, SQLite
 * opening by name; data_dir is owner-only, so only this user or root can plant there.
 */
export function claimDatabaseFile(path: string): void {
  try {
    for (const p of [path, `${path}-wal`, `${path}-shm`]) refuseLink(p);
    refuseOddSideFiles(path);
    closeSync(openPrivateFile(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === "EEXIST") {
      refuseFolder(path);
      // A FIFO of mode 0444: SQLite's read-write open refused, its read-only retry blocked for good.
      refuseNotFile(path, path);
      // SQLite gives a new WAL and shared memory the database's mode, and keeps theirs when found.
      for (const p of [path, `${path}-wal`, `${path}-shm`]) tightenExistingFile(p);
      return;
    }
    if (e.code !== "ELOOP") throw err;
    throw new CoreError(
      "internal_error",
      `${e.path} is a symbolic link; local-ai never opens its database through a link: remove the link (app.data_dir itself may be one)`,
      { key: "app.data_dir", path, file: e.path ?? path, problem: "ELOOP" },
    );
  }
}

/**
 * The files SQLite opens beside the database. Its first read opens a `-journal` it finds read-only
 * and blocking (a hot journal to roll back): a FIFO there held the main loop for good. A `-wal`
 * it cannot open read-write it opens read-only, as blocking (a FIFO of mode 0444); a FIFO at
 * `-shm` failed as a disk error. A regular file (a hot journal after a crash) is left to SQLite.
 */
const SIDE_FILES = ["-journal", "-wal", "-shm"];

/**
 * Throws for a side file that exists and is no regular file (a link, a FIFO, a folder). Also the
 * store's threads' (store/chunk-worker.ts), before their own connection's first read: one planted
 * after the main open looked held that thread, and every add, delete and search after it, for good.
 */
export function refuseOddSideFiles(path: string): void {
  for (const suffix of SIDE_FILES) refuseNotFile(path, `${path}${suffix}`);
}

/** The database itself and its side files: a thread's open, the file possibly replaced since the main one. */
export function refuseOddFiles(path: string): void {
  refuseNotFile(path, path);
  refuseOddSideFiles(path);
}

/** Throws when `file` (the database or one beside it) exists and is no regular file. */
function refuseNotFile(path: string, file: string): void {
  let kind: string | undefined;
  try {
    const st = lstatSync(file);
    if (!st.isFile()) kind = st.isSymbolicLink() ? "a symbolic link" : "not a regular file";
  } catch {
    return; // Missing (Windows included), or unreadable: SQLite's open says what it finds.
  }
  if (kind === undefined) return;
  throw new CoreError(
    "internal_error",
    `${file} is ${kind}; local-ai opens its database, its journal, log and shared memory only as regular files: remove it`,
    { key: "app.data_dir", path, file, problem: "ENOTFILE" },
  );
}

/** SQLite would only say SQLITE_CANTOPEN for a folder where the database file belongs. */
function refuseFolder(path: string): void {
  if (!lstatSync(path).isDirectory()) return;
  throw new CoreError(
    "internal_error",
    `the database path ${path} is a folder, not a file: move that folder out of the way (a fresh database is made there) or set app.data_dir to another folder`,
    { key: "app.data_dir", path, file: path, problem: "EISDIR" },
  );
}

/**
 * Throws when an opened file is another program's database: not empty, and carrying neither
 * our application_id nor our schema (a database an earlier local-ai wrote has no
 * application_id, but user_version 1 or more and our tables). Reads only, so nothing is changed.
 */
export function refuseForeign(db: Database, path: string): void {
  const appId = pragma(db, "application_id");
  if (appId === APPLICATION_ID) return;
  const tables = (
    db.query("SELECT name FROM sqlite_schema WHERE type = 'table'").all() as { name: string }[]
  ).map((r) => r.name);
  if (appId === 0 && tables.length === 0) return;
  if (appId === 0 && pragma(db, "user_version") >= 1 && OUR_TABLES.every((t) => tables.includes(t))) return;
  const why =
    appId !== 0
      ? `its application_id is ${appId}, not local-ai's`
      : `it holds tables of another program (${tables.slice(0, 5).join(", ")})`;
  throw new CoreError(
    "internal_error",
    `${path} is not local-ai's database (${why}); it is left as it is: move it away, or set app.data_dir to another folder`,
    { key: "app.data_dir", path, problem: "not_ours" },
  );
}

/** Whether the database already carries our application_id (nothing for stampOwnership to write). */
export function isStamped(db: Database): boolean {
  return pragma(db, "application_id") === APPLICATION_ID;
}

/** Marks the database as local-ai's, once (a fresh one, or one an earlier version made). */
export function stampOwnership(db: Database): void {
  if (!isStamped(db)) db.run(`PRAGMA application_id = ${APPLICATION_ID}`);
}

function pragma(db: Database, name: "application_id" | "user_version"): number {
  return (db.query(`PRAGMA ${name}`).get() as Record<string, number>)[name] ?? 0;
}
