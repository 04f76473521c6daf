import { randomBytes } from "node:crypto";
import { closeSync, linkSync, openSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { readSmallFile } from "../config/read-file.ts";

/**
 * One writer per blob, across processes: a lock file beside the `.incomplete` created with
 * O_EXCL, holding the owner's pid and a random id. A lock whose owner is gone (a killed core)
 * is stale and taken over, so a crash never blocks the next pull. The ids this process holds
 * are kept here too: a lock naming our own pid but an id we do not hold was left by an
 * earlier process that had the same pid (common in containers, where the core is often pid 1).
 */

export interface LockOwner {
  pid: number;
  id: string;
  started: number;
}

export interface HeldLock {
  readonly path: string;
  release(): void;
}

const held = new Set<string>();

/** A lock file still empty after this long was left by a writer that died while creating it. */
const EMPTY_LOCK_GRACE_MS = 10_000;

/** A lock holds a short JSON object; anything larger is not one of ours. */
const LOCK_MAX_BYTES = 4096;

/** Takes the lock, or returns who holds it (null when the file could not be read). */
export function tryLock(path: string): HeldLock | { busy: LockOwner | null } {
  for (let attempt = 0; attempt < 3; attempt++) {
    const mine: LockOwner = { pid: process.pid, id: randomBytes(8).toString("hex"), started: Date.now() };
    try {
      const fd = openSync(path, "wx");
      try {
        writeSync(fd, JSON.stringify(mine));
      } finally {
        closeSync(fd);
      }
      held.add(mine.id);
      return { path, release: () => release(path, mine.id) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    }
    const owner = readOwner(path);
    if (owner === "gone") continue;
    if (!isStale(path, owner)) return { busy: owner };
    takeOver(path, owner);
  }
  return { busy: null };
}

function release(path: string, id: string): void {
  held.delete(id);
  const owner = readOwner(path);
  if (owner !== "gone" && owner?.id === id) rmSync(path, { force: true });
}

function readOwner(path: string): LockOwner | null | "gone" {
  let text: string;
  try {
    // Never a blocking read: a FIFO put here reads as an unreadable lock, stale once old.
    text = readSmallFile(path, LOCK_MAX_BYTES);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return "gone";
    return null;
  }
  try {
    const o = JSON.parse(text) as LockOwner;
    return typeof o.pid === "number" && typeof o.id === "string" ? o : null;
  } catch {
    return null;
  }
}

function isStale(path: string, owner: LockOwner | null): boolean {
  if (owner === null) {
    try {
      return Date.now() - statSync(path).mtimeMs > EMPTY_LOCK_GRACE_MS;
    } catch {
      return false;
    }
  }
  if (owner.pid === process.pid) return !held.has(owner.id);
  return !processAlive(owner.pid);
}

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is another user's.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Moves a stale lock aside atomically (only one contender's rename succeeds), then checks that
 * what it moved is the stale lock it judged; if a contender had replaced it with a live one in
 * between, that one is put back.
 */
function takeOver(path: string, stale: LockOwner | null): void {
  const aside = `${path}.${process.pid}.${randomBytes(4).toString("hex")}.stale`;
  try {
    renameSync(path, aside);
  } catch {
    return;
  }
  const moved = readOwner(aside);
  const same = moved !== "gone" && (stale === null ? moved === null : moved?.id === stale.id);
  if (!same) {
    try {
      linkSync(aside, path);
    } catch {
      // Someone created a lock meanwhile: theirs stands.
    }
  }
  rmSync(aside, { force: true });
}
