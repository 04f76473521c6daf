import { Database } from "bun:sqlite";
import { closeSync, constants, lstatSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { ChunkThread, type OpenedAhead, threadStopped } from "../chunk-thread.ts";
import { MIGRATIONS, SCHEMA_VERSION } from "./migrations.ts";
import { BUSY_TIMEOUT_MS, DB_FILE, ftsCurrent, hasFts5 } from "./open.ts";
import { useMemoryForTemp } from "./temp-dir.ts";

/** What the file's header says at offset 60: SQLite's `user_version`, big-endian (sqlite.org/fileformat.html). */
const USER_VERSION_AT = 60;
const MAGIC = "SQLite format 3\0";

/**
 * Whether the database under `dataDir` owes its open a write that may take seconds, for the
 * thread to do (docs/agent.md, The store, "Migrations off the loop"): ours from before the latest
 * schema, read from its file's header (no connection, no lock); or at the latest schema but owing
 * its FTS5 work (`ftsOwed`). Anything else (no file, a fresh one, a link, a damaged or foreign
 * one, a newer one) is false: today's open handles it on the main loop as before. The header
 * may lag a WAL not yet checkpointed: then the thread finds the schema current and writes nothing;
 * a header at 0 with a log that holds anything goes to the thread too.
 */
export function migrationPending(dataDir: string, options: { withoutFts?: boolean } = {}): boolean {
  const path = join(dataDir, DB_FILE);
  const version = headerVersion(path);
  if (version === SCHEMA_VERSION) return ftsOwed(path, options.withoutFts === true);
  // Never checkpointed (a core killed at its first start, or one holding it open): the schema is in
  // its log, which the thread's open reads; on the loop, migrations ran there up to the ~4 MB
  // auto-checkpoint's worth.
  if (version === 0) return walHolds(`${path}-wal`);
  return (
    version !== undefined &&
    version > 0 &&
    version < SCHEMA_VERSION &&
    MIGRATIONS.some((m) => m.version > version)
  );
}

/** The file's `user_version`; undefined when it is no regular file or not SQLite's. */
function headerVersion(path: string): number | undefined {
  let fd: number | undefined;
  try {
    if (!lstatSync(path).isFile()) return undefined;
    // Non-blocking and never through a link: a FIFO planted at the name never holds the loop.
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0));
    const header = Buffer.alloc(100);
    if (readSync(fd, header, 0, 100, 0) < 100 || header.toString("latin1", 0, 16) !== MAGIC) return undefined;
    return header.readUInt32BE(USER_VERSION_AT);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * A database at the latest schema whose `meta` says its messages index was never checked
 * (open.ts `upgrade`: ~50 ms a 100,000 messages) or its FTS5 indexes unlike this SQLite's
 * (a rebuild: ~1 s a 100,000). Read on a read-only connection that never creates the file and
 * waits for no lock past BUSY_TIMEOUT_MS; FTS5 probed as openStore probes it (the thread's
 * SQLite is this one). Any error is false: the main loop's open, as before. Once a core, until
 * the store opens: ~4 ms the first (docs/performance.md).
 */
function ftsOwed(path: string, withoutFts: boolean): boolean {
  let db: Database | undefined;
  try {
    // As the main open refuses them (ownership.ts `claimDatabaseFile`): SQLite opens the log and
    // shared memory read-write, creating them, so a link there could make or truncate its target.
    // A FIFO at the journal's name: SQLite's look for a hot journal opened it blocking.
    if (![`${path}-wal`, `${path}-shm`, `${path}-journal`].every(plainOrMissing)) return false;
    db = new Database(path, { readonly: true, strict: true });
    db.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    useMemoryForTemp(db);
    return !ftsCurrent(db, !withoutFts && hasFts5(db));
  } catch {
    return false;
  } finally {
    db?.close(false);
  }
}

export interface MigratedAhead {
  /** Settles once the thread's open has ended: the reset it made, if any, and its check; rejects with the open's error. */
  done: Promise<OpenedAhead>;
  /** Shutdown: the thread is ended; a transaction it had not committed is rolled back by SQLite. */
  stop(): void;
}

/**
 * The store's open, migrations included, on a thread of its own with its own connection
 * (docs/agent.md, The store, "Migrations off the loop"): the same openStore, so a damaged file
 * is set aside, a foreign one refused and another core's lock waited out exactly as on the
 * main loop, while ping and cancel go on answering. Its connection is closed when it is done.
 */
export function migrateAhead(dataDir: string, options: { withoutFts?: boolean } = {}): MigratedAhead {
  const path = join(dataDir, DB_FILE);
  const thread = new ChunkThread(path, 0);
  let stopped = false;
  // Ended by `stop` (shutdown), the open rejected "the database was closed ... removed, replaced",
  // no stop named: a waiting erase was answered that internal_error, never the `cancelled` a
  // stop's end is (server/migrate-first.ts), so its host did not know to send it again.
  const done = thread.openAhead(dataDir, options.withoutFts === true).then(
    (opened) => {
      thread.stop();
      return opened;
    },
    (err: unknown) => {
      thread.stop();
      throw stopped ? threadStopped(path, "the core's stop ended it") : err;
    },
  );
  const stop = () => {
    stopped = true;
    thread.stop();
  };
  return { done, stop };
}

/** A regular file (never a link, a FIFO) with something in it. */
function walHolds(path: string): boolean {
  try {
    const stat = lstatSync(path);
    return stat.isFile() && stat.size > 0;
  } catch {
    return false;
  }
}

function plainOrMissing(path: string): boolean {
  try {
    return lstatSync(path).isFile();
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT";
  }
}
