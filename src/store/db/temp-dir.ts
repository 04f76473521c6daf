import type { Database } from "bun:sqlite";
import { dirname, resolve } from "node:path";

/**
 * Where SQLite's temporary data goes. An erase's VACUUM (store/erase.ts `rewritePages`) builds a
 * copy of every live row in a temporary database; in the OS's temp folder that copy can sit on
 * another file system (an unencrypted root under an encrypted home, a small tmpfs), whose freed
 * blocks then hold the user's conversations. So the copy goes to the data folder. But every other
 * statement's temporary b-trees must not follow it there: on a full data disk they failed too, and
 * a failed add's text stayed readable (test/documents/add-full-disk.test.ts). Hence: temporary
 * tables in memory on every connection (`useMemoryForTemp`), and files, in the data folder, only
 * around the VACUUM (`withTempFiles`), which runs only with twice the database free there.
 */

/**
 * `temp_store_directory` is one setting for the whole process, read by every connection's thread
 * as it makes a temporary file, so it is set only from the main thread's open (store/db/open.ts),
 * and only when it changes: a core has one data_dir, so once. Measured (strace): without it the
 * copy was an O_TMPFILE in /var/tmp; with it, in the data folder.
 */
export function keepTempFilesBeside(db: Database, databasePath: string): void {
  const dir = dirname(resolve(databasePath));
  if (tempDirectory(db) === dir) return;
  db.run(`PRAGMA temp_store_directory = '${dir.replaceAll("'", "''")}'`);
}

/** The folder SQLite makes its temporary files in; "" for its default (the OS's). */
export function tempDirectory(db: Database): string {
  const row = db.query("PRAGMA temp_store_directory").get() as { temp_store_directory?: string } | null;
  return row?.temp_store_directory ?? "";
}

/** This connection's temporary tables and indices in memory (a statement's own, small). */
export function useMemoryForTemp(db: Database): void {
  db.run("PRAGMA temp_store = MEMORY");
}

/** `fn` with this connection's temporary data in files (the VACUUM's copy: the whole database). */
export function withTempFiles<T>(db: Database, fn: () => T): T {
  db.run("PRAGMA temp_store = FILE");
  try {
    return fn();
  } finally {
    db.run("PRAGMA temp_store = MEMORY");
  }
}
