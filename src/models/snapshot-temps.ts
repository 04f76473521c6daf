import { randomBytes } from "node:crypto";
import { lstatSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { pidAlive } from "../platform/pid-alive.ts";

/**
 * A snapshot entry's temp (snapshot-link.ts) is made beside it and renamed into place; where the
 * folder takes no links it is a copy of the model, gigabytes. A core killed during that copy (or
 * its flush) left the temp, hidden, for good. So a temp's name holds its maker's pid
 * (`.<pid>-<12 hex>.tmp`) and each link into a snapshot folder first removes the ones no pull is
 * still making (docs/models.md "The cache"). The blob's lock is released before linking, so it
 * cannot say who owns a temp; a pid alone cannot either (another pid namespace sharing the cache,
 * a pid reused after a reboot), so time joins it: a copy under way writes its temp all along.
 */
const OURS = /^\.(\d+)-[0-9a-f]{12}\.tmp$/;
/** An earlier build's temp name (no pid): removed only once untouched as long as no copy lasts. */
const EARLIER = /^\.[0-9a-f]{12}\.tmp$/;
/** Untouched this long, a temp whose maker is gone is not being written (a flush takes minutes at most). */
const GONE_AFTER_MS = 3600 * 1000;
/** Untouched this long, no pull is making a temp, whoever its pid now names. */
const STALE_AFTER_MS = 24 * 3600 * 1000;

/** This process's copies under way: never swept, its pid alive or not in the name's sense. */
export const liveTemps = new Set<string>();

/** A new temp's path in `dir`, named for this process. */
export function snapshotTemp(dir: string): string {
  return join(dir, `.${process.pid}-${randomBytes(6).toString("hex")}.tmp`);
}

/**
 * Removes the temps in `dir` that no pull is making. Never throws: a temp that cannot be read or
 * removed is left, the link is what matters. One folder's names (a snapshot holds the files pulled).
 */
export function sweepDeadTemps(dir: string, now = Date.now()): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const ours = OURS.exec(name);
    if (!ours && !EARLIER.test(name)) continue;
    const path = join(dir, name);
    if (liveTemps.has(path)) continue;
    try {
      const untouched = now - lstatSync(path).mtimeMs;
      // This pid's own temp not under way is an earlier process's (a container's core is often the same pid).
      const gone = ours !== null && (Number(ours[1]) === process.pid || !pidAlive(Number(ours[1])));
      if ((gone && untouched > GONE_AFTER_MS) || untouched > STALE_AFTER_MS) rmSync(path, { force: true });
    } catch {
      // Gone meanwhile (another pull swept it), or not ours to remove: left.
    }
  }
}
