import type { Database } from "bun:sqlite";
import { existsSync, lstatSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { CoreError } from "../../protocol/errors.ts";
import { logger } from "../../util/logger.ts";
import { namesIn } from "../../util/names-in.ts";
import { ensurePrivateTree, tightenExistingFile, writePrivateFile } from "../../util/private-fs.ts";
import { NotRegularFile, readSmallFile } from "../../util/read-file.ts";
import { dataDirError } from "../data-dir-problem.ts";
import { type FileStamp, fileStamp, sameStamp } from "./file-stamp.ts";
import {
  emptyIndexTables,
  FTS_TABLES,
  ftsSecureDeleteSet,
  indexOthersOut,
  rebuildIndex,
} from "./fts-forget.ts";
import { enableFtsSecureDelete } from "./fts-secure-delete.ts";
import { MIGRATIONS, SCHEMA_VERSION } from "./migrations.ts";
import { claimDatabaseFile, isStamped, refuseForeign, stampOwnership } from "./ownership.ts";
import { ASIDE_INFIX, clearResetNote, pendingReset, writeResetNote } from "./reset-note.ts";
import { StatementDatabase } from "./statements.ts";
import { keepTempFilesBeside, useMemoryForTemp } from "./temp-dir.ts";

/** The database's file name under app.data_dir. */
export const DB_FILE = "local-ai.db";
/**
 * How long a statement waits, blocking the thread, for another process's write lock: short,
 * since a write holds it for a moment; Store.write retries past it without blocking the loop.
 */
export const BUSY_TIMEOUT_MS = 20;

export interface OpenedStore {
  db: Database;
  path: string;
  /** Whether SQLite here has FTS5; without it, search and memory fall back to LIKE. */
  fts: boolean;
  /** Whether `quick_check` read it whole at this open, and found it sound. */
  checked?: boolean;
  /** Set when the database could not be used and was moved aside: that path. */
  resetFrom?: string;
  resetProblem?: string;
}

export interface OpenOptions {
  now?: () => Date;
  /** Tests: behave as a SQLite without FTS5 would. */
  withoutFts?: boolean;
  /** The reset the open on a thread made (db/migrate-ahead.ts): the host hears of it as of one made here. */
  resetAhead?: { aside: string; problem: string };
  /** The file as the thread's open left it once its `quick_check` passed: unchanged, it is not read whole again. */
  checkedAhead?: FileStamp;
}

/**
 * Opens (creating when missing) the one database under `dataDir`: WAL (readers never wait for
 * the writer; a commit is one append), `synchronous=NORMAL` (a commit survives the process's
 * death at any instant; a power cut may lose the last commits, never the file's integrity),
 * foreign keys on (a session's rows go with it), `secure_delete` (deleted text is zeroed, not
 * left in free pages), a busy timeout for the other core on the same folder. A file that is not
 * a database or fails `quick_check` is moved aside and a fresh one is made (`resetFrom`).
 */
export function openStore(dataDir: string, options: OpenOptions = {}): OpenedStore {
  // Two cores opening a fresh database at once (two app windows' first start): one creates and
  // migrates it under a write lock for a moment, which the other's short busy timeout does not
  // outlast. That one waits and tries again, bounded (OPEN_BUSY_WAIT_MS), rather than failing.
  const deadline = Date.now() + OPEN_BUSY_WAIT_MS;
  for (let wait = 10; ; wait = Math.min(wait * 2, 100)) {
    try {
      const opened = openOnce(dataDir, options);
      // The thread's, or one a core stopped before it was told left noted (reset-note.ts).
      const told = opened.resetFrom === undefined && (options.resetAhead ?? pendingReset(opened.path));
      return told ? { ...opened, resetFrom: told.aside, resetProblem: told.problem } : opened;
    } catch (err) {
      const busy = err instanceof CoreError && String(err.data?.problem ?? "").startsWith("SQLITE_BUSY");
      if (!busy || Date.now() >= deadline) throw err;
      Bun.sleepSync(wait);
    }
  }
}

/** How long an open waits for another process's lock (only at a database's first open, in practice). */
export const OPEN_BUSY_WAIT_MS = 3000;

function openOnce(dataDir: string, options: OpenOptions): OpenedStore {
  const now = options.now ?? (() => new Date());
  // Created owner-only when missing; a folder the user made keeps the mode they gave it. One
  // that cannot be (a file in its place) is named, for every method that needs the store.
  try {
    ensurePrivateTree(dataDir);
  } catch (err) {
    throw dataDirError(err, dataDir) ?? err;
  }
  tightenSetAside(dataDir);
  const path = join(dataDir, DB_FILE);
  let problem: string | undefined;
  try {
    const db = connect(path);
    try {
      const stamp = fileStamp(path);
      const whole = (stamp?.size ?? 0) <= FULL_CHECK_BYTES && !sameStamp(options.checkedAhead, stamp);
      problem = healthProblem(db, path, whole);
      if (problem === undefined) return { ...prepare(db, path, options), checked: whole };
    } catch (err) {
      db.close(false);
      throw err;
    }
    db.close(false);
  } catch (err) {
    const code = (err as { code?: string }).code ?? "";
    // Only a damaged file is moved aside; a locked, full or unwritable one is an error to report.
    if (!/SQLITE_(CORRUPT|NOTADB)/.test(code)) throw storeError(err, path);
    problem = (err as Error).message;
  }
  const aside = `${path}${ASIDE_INFIX}${now().toISOString().replace(/[:.]/g, "-")}`;
  writeResetNote(path, { aside, problem: problem ?? "" });
  moveDatabaseAside(path, aside);
  logger.warn(`the database ${path} could not be used (${problem}); moved to ${aside}, starting a fresh one`);
  const fresh = prepare(connect(path), path, options);
  fresh.db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('reset_from', ?), ('reset_problem', ?)", [
    aside,
    problem ?? "",
  ]);
  return { ...fresh, resetFrom: aside, resetProblem: problem ?? "" };
}

function connect(path: string): Database {
  claimDatabaseFile(path);
  const db = new StatementDatabase(path, { create: true, readwrite: true, strict: true });
  db.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  try {
    // Before any pragma below writes to it: another program's database is left as it is.
    refuseForeign(db, path);
  } catch (err) {
    db.close(false);
    throw err;
  }
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA synchronous = NORMAL");
  db.run("PRAGMA foreign_keys = ON");
  db.run("PRAGMA secure_delete = ON");
  keepTempFilesBeside(db, path);
  useMemoryForTemp(db);
  return db;
}

/**
 * Up to this size the whole file is checked at open (`quick_check` reads every page: about 6 ms
 * a megabyte here). A bigger one is checked by its schema only, so the first chat does not
 * wait; damage deeper in it surfaces as SQLITE_CORRUPT on the statement that meets it, which
 * marks the file for a reset at the next start (markDamaged), and `doctor` checks it whole.
 */
export const FULL_CHECK_BYTES = 16 * 2 ** 20;

/** The most of a damage note read: it holds one SQLite message. */
export const DAMAGE_NOTE_BYTES = 64 * 1024;

/** A file beside the database saying a statement met damage in it: the next open resets it. */
export const damagedMarker = (path: string) => `${path}.damaged`;

export function markDamaged(path: string, problem: string): void {
  try {
    writePrivateFile(damagedMarker(path), `${problem}\n`);
  } catch {}
}

/**
 * Whether the database has a damage note. A folder at its name is none (the core writes the note
 * as a file): taken for one, every open set the healthy database aside, then failed removing it.
 */
export function damageNoted(path: string): boolean {
  const note = damagedMarker(path);
  if (!existsSync(note)) return false;
  if (!lstatSync(note).isDirectory()) return true;
  logger.warn(`${note} is a folder, not the core's damage note: left as it is`);
  return false;
}

/**
 * What a damage note says; one that cannot be read is named so, never thrown (doctor reads it
 * too). Only a small regular file is read: a FIFO at its name blocked the open for good. Never
 * through a link, as no file of the core's in data_dir is: one planted there had a private file
 * of the user's quoted whole in doctor's report and the chat's store_reset warning.
 */
export function damageNote(file: string): string {
  try {
    return readSmallFile(file, DAMAGE_NOTE_BYTES, { follow: false }).trim();
  } catch (err) {
    const why = err instanceof NotRegularFile ? err.kind : (err as NodeJS.ErrnoException).code;
    return `its note cannot be read: ${why ?? (err as Error).message}`;
  }
}

/** What is wrong with an opened file, or undefined when it is fit to use. */
function healthProblem(db: Database, path: string, whole: boolean): string | undefined {
  const version = (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
  if (version > SCHEMA_VERSION) {
    throw new CoreError(
      "internal_error",
      `the database was written by a newer local-ai (schema ${version}; this one knows ${SCHEMA_VERSION}); use that version, or move the file aside`,
    );
  }
  if (damageNoted(path)) return `a statement met damage in it (${damageNote(damagedMarker(path))})`;
  // Too big to read whole at open, or the thread's open just did (db/migrate-ahead.ts).
  if (!whole) {
    db.query("SELECT count(*) FROM sqlite_schema").get();
    return undefined;
  }
  return integrityProblem(db);
}

/** `quick_check`'s verdict: undefined when ok (doctor runs it on any size). */
export function integrityProblem(db: Database): string | undefined {
  const rows = db.query("PRAGMA quick_check").all() as { quick_check: string }[];
  const first = rows[0]?.quick_check;
  return first === "ok" ? undefined : `quick_check: ${rows.map((r) => r.quick_check).join("; ")}`;
}

function prepare(db: Database, path: string, options: OpenOptions): OpenedStore {
  try {
    const fts = !options.withoutFts && hasFts5(db);
    migrate(db, fts);
    return { db, path, fts };
  } catch (err) {
    db.close(false);
    throw storeError(err, path);
  }
}

/** Whether this SQLite has FTS5: a probe table made and dropped in `temp` (a read-only connection's too). */
export function hasFts5(db: Database): boolean {
  try {
    db.run("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)");
    db.run("DROP TABLE temp.fts5_probe");
    return true;
  } catch {
    return false;
  }
}

/**
 * The schema brought up to date, in one write; a database already current is only read, so a
 * core opening it while another holds the write lock (a long erase) does not wait on it.
 */
function migrate(db: Database, fts: boolean): void {
  if (!current(db, fts)) upgrade(db, fts);
  if (fts && !ftsSecureDeleteSet(db)) enableFtsSecureDelete(db);
}

/** Nothing for `upgrade` to write: ours, the latest schema, its FTS5 indexes as this SQLite can have them. */
function current(db: Database, fts: boolean): boolean {
  const version = (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
  return version === SCHEMA_VERSION && isStamped(db) && ftsCurrent(db, fts);
}

/**
 * The FTS5 indexes as this SQLite can have them (`meta.fts`) and, with FTS5, the one-time check
 * done; migrate-ahead.ts asks it too, so a database owing either is migrated on the thread.
 */
export function ftsCurrent(db: Database, fts: boolean): boolean {
  const indexed = db.query("SELECT value FROM meta WHERE key = 'fts'").get() as { value: string } | null;
  return fts === (indexed?.value === "1") && (!fts || repaired(db));
}

/**
 * The messages index checked once for what an earlier version's FTS5 'rebuild' left in it
 * (fts-forget.ts `indexOthersOut`), marked in meta rather than by a schema number: the schema
 * is the same, and a core of the version before still opens the database (a host's rollback).
 */
const REPAIRED = "fts_roles_checked";
const repaired = (db: Database) => db.query("SELECT 1 FROM meta WHERE key = ?").get(REPAIRED) !== null;

function upgrade(db: Database, fts: boolean): void {
  db.transaction(() => {
    const version = (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
    stampOwnership(db);
    for (const step of MIGRATIONS) {
      if (step.version <= version) continue;
      for (const sql of step.sql) db.run(sql);
      if (fts) for (const sql of step.fts ?? []) db.run(sql);
      step.after?.(db, fts);
      db.run(`PRAGMA user_version = ${step.version}`);
    }
    const indexed = db.query("SELECT value FROM meta WHERE key = 'fts'").get() as { value: string } | null;
    if (fts && indexed?.value !== "1") {
      // Made without FTS5 (or before it): build the indexes from the tables now.
      if (version > 0) addFtsTables(db);
      db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts', '1')");
    } else if (!fts && indexed?.value === "1") {
      // Made where FTS5 was, opened where it is not: the index triggers would fail every write.
      // They go; the index is rebuilt from the tables where FTS5 is back.
      for (const t of FTS_TRIGGERS) db.run(`DROP TRIGGER IF EXISTS ${t}`);
      emptyIndexTables(db);
      db.run("UPDATE meta SET value = '0' WHERE key = 'fts'");
    }
    if (fts && !repaired(db)) {
      indexOthersOut(db, fts);
      db.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", [REPAIRED]);
    }
  }).immediate();
}

const FTS_TRIGGERS = ["messages_fts_insert", "messages_fts_delete", "memory_fts_insert", "memory_fts_delete"];

function addFtsTables(db: Database): void {
  for (const step of MIGRATIONS) for (const sql of step.fts ?? []) db.run(sql);
  for (const t of FTS_TABLES) rebuildIndex(db, t);
}

/** Kept where its notes' check reads it (reset-note.ts), and named here for the callers of the open. */
export { ASIDE_INFIX };

/**
 * The databases set aside (and their logs) made owner-only as the live one is (ownership.ts): one
 * an older version set aside, or copied back from a backup, kept group and other read bits, every
 * user's conversations as they were. A link or a file this user cannot change is left as it is.
 */
function tightenSetAside(dataDir: string): void {
  for (const name of namesIn(dataDir)) {
    if (!name.startsWith(`${DB_FILE}${ASIDE_INFIX}`)) continue;
    try {
      tightenExistingFile(join(dataDir, name));
    } catch {}
  }
}

export function moveDatabaseAside(path: string, aside: string): void {
  try {
    renameSync(path, aside);
    rmSync(damagedMarker(path), { force: true });
    // The journal too: a hot one left at the old name was rolled back into the fresh database.
    for (const suffix of ["-wal", "-shm", "-journal"]) {
      if (existsSync(path + suffix)) renameSync(path + suffix, aside + suffix);
    }
  } catch (err) {
    if (!existsSync(aside)) clearResetNote(path);
    throw new CoreError(
      "internal_error",
      `the database ${path} is unusable and could not be moved aside: ${(err as Error).message}`,
      { path },
    );
  }
}

/**
 * A store closed under a request still holding it (services.ts dropStore: the database removed,
 * replaced or writable again): named, not "see the core's log", since the host may send it again
 * (docs/agent.md, "Removed while the core runs").
 */
export function storeClosed(path: string): CoreError {
  return new CoreError(
    "internal_error",
    `the database ${path} was closed while this request ran (removed, replaced or opened again); send it again`,
    { key: "app.data_dir", path },
  );
}

/** SQLite's failures in words a person acts on, naming the file. */
export function storeError(err: unknown, path: string, closed = false): Error {
  if (err instanceof CoreError) return err;
  if (closed) return storeClosed(path);
  const code = (err as { code?: string }).code ?? "";
  if (/^SQLITE_(CORRUPT|NOTADB)/.test(code)) {
    markDamaged(path, (err as Error).message);
    return new CoreError(
      "internal_error",
      `the database ${path} is damaged (${(err as Error).message}); it is set aside at the core's next start and a fresh one used`,
      { key: "app.data_dir", path, problem: code },
    );
  }
  const why: Record<string, string> = {
    SQLITE_BUSY: `another process holds the database ${path} locked; try again`,
    SQLITE_LOCKED: `the database ${path} is locked; try again`,
    SQLITE_FULL: `no space left on the disk for the database ${path}`,
    SQLITE_READONLY: `the database ${path} cannot be written (read-only file or folder)`,
    SQLITE_CANTOPEN: `the database ${path} cannot be opened (check that app.data_dir is a folder this user can write)`,
    SQLITE_PERM: `permission denied for the database ${path}`,
    SQLITE_IOERR: `the disk failed a read or write of the database ${path}`,
  };
  const key = Object.keys(why).find((k) => code.startsWith(k));
  if (!key) return err as Error;
  return new CoreError("internal_error", `${why[key]}: ${(err as Error).message}`, {
    key: "app.data_dir",
    path,
    problem: code,
  });
}
