import { statfsSync } from "node:fs";
import { dirname } from "node:path";

/** Bytes a user may still write where `path` is (or would be created). Tests inject their own. */
export type FreeSpaceProbe = (path: string) => number;

/** Kept free beyond the download itself: the OS, the snapshot links, other writers. */
export const SPACE_MARGIN_BYTES = 128 * 1024 * 1024;

/** statfs of the nearest folder that exists: the cache may not be created yet. */
export const statfsFree: FreeSpaceProbe = (path) => {
  let p = path;
  for (;;) {
    try {
      const s = statfsSync(p);
      return Number(s.bavail) * Number(s.bsize);
    } catch (err) {
      const parent = dirname(p);
      if (parent === p) throw err;
      p = parent;
    }
  }
};

/** Whether `remaining` bytes plus the margin fit in `free`; the shortfall otherwise. */
export function spaceShortfall(remaining: number, free: number, margin = SPACE_MARGIN_BYTES): number {
  return Math.max(0, remaining + margin - free);
}
