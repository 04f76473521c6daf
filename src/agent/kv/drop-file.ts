import { lstatSync, unlinkSync } from "node:fs";
import { isAlive } from "../../runtime/proc-info.ts";
import { logger } from "../../util/logger.ts";

// The KV state folder's removals (kv-disk.ts), which never throw into a turn or a save.

/** Whether the writer of a temporary file runs: this core, or a live process (proc-info.ts). */
export const alive = (pid: number) => pid === process.pid || isAlive(pid);

/**
 * Removes a file of ours, never throwing: a directory (or anything else) in its place is left
 * where it is, and said once; a folder that is not one (ENOTDIR) has nothing to remove. False
 * when the file is still there.
 */
export function dropFile(path: string): boolean {
  try {
    if (lstatSync(path).isDirectory()) {
      logger.warn(`${path} is a directory where a KV state file belongs: left as it is`);
      return true;
    }
    unlinkSync(path);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "ENOENT" || code === "ENOTDIR") return true;
    logger.warn(`${path} could not be removed: ${(err as Error).message}`);
    return false;
  }
  return true;
}
