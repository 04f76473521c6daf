import { unlinkSync } from "node:fs";
import { lutimes } from "node:fs/promises";
import { dirname } from "node:path";
import { logger } from "../util/logger.ts";

// This core's own process records (pid-file.ts) while their process runs: removed once it is
// gone, and their file's time renewed meanwhile.

/**
 * How often a live core renews its records' time: another pid space's core removes a record
 * untouched for 30 days (pid-record-read.ts `OTHER_SPACE_KEEP_MS`), and one written only at its
 * server's start was removed under a live llama-server or MCP server run for longer; once its
 * core was killed outright, the next core there never reaped that orphan (docs/supervisor.md).
 */
export const REFRESH_MS = 86_400_000;

/** Each kept record, by the count of its keep: a touch's ENOENT forgets only the keep it touched. */
const kept = new Map<string, number>();
let keeps = 0;
let timer: ReturnType<typeof setInterval> | undefined;
let refreshing = false;

/** `file` is this core's record now: its time renewed daily until `forgetOwnRecord`. */
export function keepOwnRecord(file: string): void {
  kept.set(file, ++keeps);
  if (timer) return;
  timer = setInterval(() => void refreshOwnRecords(), REFRESH_MS);
  timer.unref?.();
}

/** `file` is no longer this core's record (removed, or moved aside under another name). */
export function forgetOwnRecord(file: string): void {
  kept.delete(file);
  if (kept.size > 0 || !timer) return;
  clearInterval(timer);
  timer = undefined;
}

/**
 * Renews each kept record's time, off the loop (a share gone offline holds a pool thread, never
 * ping or cancel) and one round at a time; never through a link. One gone (removed by hand) is
 * forgotten, never written again by a touch, unless kept again meanwhile: a llama-server
 * restarted under the same name while the touch was out had its new record never renewed.
 */
export async function refreshOwnRecords(now = new Date()): Promise<void> {
  if (refreshing) return;
  refreshing = true;
  try {
    await Promise.all(
      [...kept].map(async ([file, keep]) => {
        try {
          await lutimes(file, now, now);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOENT" && kept.get(file) === keep)
            forgetOwnRecord(file);
        }
      }),
    );
  } finally {
    refreshing = false;
  }
}

/**
 * A record removed; one already gone is fine. Never throws: a stop goes on whatever is in
 * run/'s place, and the warning names it (Bun's `rmSync` with `force` reports a file where a
 * folder belongs as EFAULT, so the unlink's own code is read instead).
 */
export function removeRecordFile(file: string): void {
  forgetOwnRecord(file);
  try {
    unlinkSync(file);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === "ENOENT") return;
    const why =
      e.code === "ENOTDIR"
        ? `a file stands on the path of its folder ${dirname(file)}; remove that file so the core can keep its process records there`
        : e.message;
    logger.warn(`the process record ${file} could not be removed: ${why}`);
  }
}
