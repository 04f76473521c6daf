import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { logger } from "../util/logger.ts";
import { zeroFileSync } from "./scrub-file.ts";

/**
 * Removes a file or a folder of a conversation's words, each regular file in it zeroed and synced
 * first (scrub-file.ts: unlinked alone, its blocks keep the words; docs/agent.md, The store). Links
 * are removed, never followed. The zeroing is best effort, as SQLite's `secure_delete` is: a file
 * it cannot open for writing (read-only, another user's) is still removed, with a warning, since
 * an erase that kept the name would keep the words readable too. For the store's thread: synchronous.
 */
export function removeZeroedSync(path: string): void {
  zeroTree(path);
  rmSync(path, { recursive: true, force: true });
}

function zeroTree(path: string): void {
  let entries: import("node:fs").Dirent[];
  try {
    entries = readdirSync(path, { withFileTypes: true });
  } catch (err) {
    // Not a folder: the file itself (a link is refused by zeroFileSync, ELOOP); gone: nothing to do.
    const code = (err as { code?: string }).code;
    if (code === "ENOTDIR") zeroOne(path);
    else if (code !== "ENOENT")
      logger.warn(`${path} could not be listed to zero it before its removal: ${code}`);
    return;
  }
  for (const e of entries) {
    // The entry's own type (readdir does not follow a link): a linked folder is never entered.
    if (e.isDirectory()) zeroTree(join(path, e.name));
    else if (e.isFile()) zeroOne(join(path, e.name));
  }
}

function zeroOne(path: string): void {
  try {
    zeroFileSync(path);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code !== "ENOENT" && code !== "ELOOP")
      logger.warn(
        `${path} could not be zeroed before its removal (${code ?? (err as Error).message}): removed all the same`,
      );
  }
}
