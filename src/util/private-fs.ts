import { chmodSync, fchmodSync, fstatSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";

/**
 * Owner-only modes for what the core keeps under data_dir: folder names are user and session
 * ids, files hold conversations and llama-server's log. POSIX only; Windows ignores these bits
 * (a folder there inherits the ACL of the profile it lives in).
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

const tightens = process.platform !== "win32";

/**
 * Creates `dir` (and missing parents) owner-only, and tightens `dir` itself if it already
 * exists with group or other bits (an older version made it 0755). Call it only on a folder
 * the core owns: existing parents are never changed.
 */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  if (!tightens) return;
  const mode = statSync(dir).mode & 0o777;
  if (mode & 0o077) tryChmod(() => chmodSync(dir, mode & PRIVATE_DIR_MODE));
}

/**
 * `base/seg1/seg2/…` with every segment owner-only (each tightened as in ensurePrivateDir).
 * `base` is the user's data_dir: created owner-only when missing, left as it is when it exists.
 */
export function ensurePrivateTree(base: string, ...segments: string[]): string {
  mkdirSync(base, { recursive: true, mode: PRIVATE_DIR_MODE });
  let dir = base;
  for (const segment of segments) {
    dir = join(dir, segment);
    ensurePrivateDir(dir);
  }
  return dir;
}

/** Tightens an open file that an older version created with group or other bits. */
export function tightenOpenFile(fd: number): void {
  if (!tightens) return;
  const mode = fstatSync(fd).mode & 0o777;
  if (mode & 0o077) tryChmod(() => fchmodSync(fd, mode & PRIVATE_FILE_MODE));
}

function tryChmod(change: () => void): void {
  try {
    change();
  } catch {
    // Not ours to change (another owner, a read-only mount): the write itself still decides.
  }
}
