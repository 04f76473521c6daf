import { closeSync, constants, lstatSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { ChunkThread } from "../chunk-thread.ts";
import { MIGRATIONS, SCHEMA_VERSION } from "./migrations.ts";
import { DB_FILE } from "./open.ts";

/** What the file's header says at offset 60: SQLite's `user_version`, big-endian (sqlite.org/fileformat.html). */
const USER_VERSION_AT = 60;
const MAGIC = "SQLite format 3\0";

/**
 * Whether the database under `dataDir` is ours from before the latest schema, read from its
 * file's header (no connection, no lock: a normal start pays one 100-byte read). Anything else
 * (no file, a fresh one, a link, a damaged or foreign one, a newer one) is false: today's open
 * handles it on the main loop as before. The header may lag a WAL not yet checkpointed: then
 * the thread finds the schema current and writes nothing.
 */
export function migrationPending(dataDir: string): boolean {
  const path = join(dataDir, DB_FILE);
  let fd: number | undefined;
  try {
    if (!lstatSync(path).isFile()) return false;
    // Non-blocking and never through a link: a FIFO planted at the name never holds the loop.
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0));
    const header = Buffer.alloc(100);
    if (readSync(fd, header, 0, 100, 0) < 100 || header.toString("latin1", 0, 16) !== MAGIC) return false;
    const version = header.readUInt32BE(USER_VERSION_AT);
    return version > 0 && version < SCHEMA_VERSION && MIGRATIONS.some((m) => m.version > version);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

export interface MigratedAhead {
  /** Settles once the thread's open has ended: the reset it made, if any; rejects with the open's error. */
  done: Promise<{ aside: string; problem: string } | undefined>;
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
  const thread = new ChunkThread(join(dataDir, DB_FILE), 0);
  const done = thread.openAhead(dataDir, options.withoutFts === true).finally(() => thread.stop());
  return { done, stop: () => thread.stop() };
}
