import type { Database } from "bun:sqlite";
import { join, relative } from "node:path";
import type { TextFile } from "./folder-walk.ts";
import { NEW_MEMORY_ID } from "./memory-ids.ts";

// The `memory.folders` index's rows (store/folder-index.ts): a folder's passages (`memory`, user
// '' and the folder in `root`, the file in `source` as `file:<path below the folder>`) and its
// files' records (`memory_files`), always changed together in one transaction.

/** A batch's files read: each file's passages replaced and its record written, in one transaction. */
export function insertPassages(
  db: Database,
  root: string,
  read: readonly { file: TextFile; parts: string[] | undefined }[],
): void {
  db.transaction(() => {
    const drop = db.query("DELETE FROM memory WHERE user_id = '' AND root = ? AND source = ?");
    const add = db.query(
      `INSERT INTO memory (id, user_id, session_id, seq, source, root, text, at) VALUES (${NEW_MEMORY_ID}, '', '', ?, ?, ?, ?, ?)`,
    );
    const remember = db.query(
      "INSERT OR REPLACE INTO memory_files (path, root, size, mtime_ms) VALUES (?, ?, ?, ?)",
    );
    for (const { file, parts } of read) {
      if (!parts) continue;
      const source = `file:${relative(root, file.path)}`;
      const at = Math.round(file.mtimeMs);
      drop.run(root, source);
      parts.forEach((text, i) => {
        add.run(i, source, root, text, at);
      });
      remember.run(file.path, root, file.size, at);
    }
  })();
}

/** Files gone: their passages and this folder's records of them, in one transaction. */
export function dropFiles(db: Database, root: string, paths: readonly string[]): void {
  db.transaction(() => {
    const drop = db.query("DELETE FROM memory WHERE user_id = '' AND root = ? AND source = ?");
    // Another folder's record of the same path (an earlier version walked nested folders twice) is that folder's.
    const forget = db.query("DELETE FROM memory_files WHERE path = ? AND root = ?");
    for (const path of paths) {
      drop.run(root, `file:${relative(root, path)}`);
      forget.run(path, root);
    }
  })();
}

/** The files a folder has passages of but no record of (not in `known`). */
export function filesWithoutRecord(
  db: Database,
  root: string,
  known: ReadonlyMap<string, unknown>,
): string[] {
  const sources = db
    .query("SELECT DISTINCT source FROM memory WHERE user_id = '' AND root = ?")
    .all(root) as { source: string }[];
  return sources.map((r) => join(root, r.source.slice("file:".length))).filter((p) => !known.has(p));
}

/** The folders with passages or records that `folders` (memory.folders now) no longer names. */
export function unlistedRoots(db: Database, folders: readonly string[]): string[] {
  const listed = new Set(folders);
  const rows = db
    .query("SELECT root FROM memory_files UNION SELECT DISTINCT root FROM memory WHERE user_id = ''")
    .all() as { root: string }[];
  return rows.map((r) => r.root).filter((r) => !listed.has(r));
}

/** A folder's files as recorded: path → size and modification time at their read. */
export function recordedFiles(db: Database, root: string): Map<string, { size: number; mtime_ms: number }> {
  const rows = db.query("SELECT path, size, mtime_ms FROM memory_files WHERE root = ?").all(root) as {
    path: string;
    size: number;
    mtime_ms: number;
  }[];
  return new Map(rows.map((r) => [r.path, r]));
}
