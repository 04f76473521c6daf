import { randomBytes } from "node:crypto";
import {
  closeSync,
  futimesSync,
  linkSync,
  openSync,
  renameSync,
  rmSync,
  type Stats,
  statSync,
  writeSync,
} from "node:fs";
import { pidAlive } from "../platform/pid-alive.ts";
import { pidSpace, writtenRelation } from "../platform/pid-space.ts";
import { readSmallFile } from "../util/read-file.ts";

/**
 * One writer per blob, across processes: a lock file beside the `.incomplete` created with
 * O_EXCL, holding the owner's pid, a random id and, where the OS tells it, when the owner
 * process started. A lock whose owner is gone (a killed core) is stale and taken over, so a
 * crash never blocks the next pull. A pid alone does not say the owner is gone: pids are
 * reused, after a reboot above all, so a live process whose start time is not the recorded
 * one is not the owner. The ids this process holds are kept here too: a lock naming our own
 * pid but an id we do not hold was left by an earlier process that had the same pid (common
 * in containers, where the core is often pid 1). And whatever the pid says, the holder keeps
 * its lock fresh (its file touched every HEARTBEAT_MS), so a waiter gives up on a lock that
 * shows no sign of life for LOCK_QUIET_MS (LockWatch), and takes at once one whose file has
 * not been touched for LOCK_ABANDONED_MS, or missed two beats while its pid names a process
 * that started after the lock was written (a lock without `proc_start`, a pid reused). A lock
 * of another pid space is never taken at once: only a waiter's LockWatch gives up on it.
 */

export interface LockOwner {
  pid: number;
  id: string;
  started: number;
  /** The owner process's start time (runtime/proc-info's `start_time`), when it was known. */
  proc_start?: string;
  /** Which processes its pid names (platform/pid-space.ts); absent in an earlier version's lock. */
  space?: string;
}

export interface HeldLock {
  readonly path: string;
  release(): void;
}

export interface LockOptions {
  /**
   * When process `pid` started, as the OS tells it (runtime/proc-info's `start_time`), or null.
   * Handed in from above: the reaper's reading of a process, one floor up.
   */
  processStart?: ((pid: number) => string | null) | undefined;
  /**
   * When process `pid` started by the wall clock (runtime/proc-info's `processStartedAt`), or
   * null: a pid whose process started after the lock was written is not its owner.
   */
  processStartedAt?: ((pid: number) => number | null) | undefined;
  /** How often a held lock's file is touched (default HEARTBEAT_MS). */
  heartbeatMs?: number | undefined;
  /** Tests: this core's pid space (platform/pid-space.ts `pidSpace`, by default). */
  space?: string | undefined;
}

/** A held lock's file is touched this often: the sign of life a waiter looks for. */
export const HEARTBEAT_MS = 5_000;

/**
 * A lock that shows no sign of life for this long (no beat, no byte added to its partial) has
 * no live writer: 12 beats missed in a row, far beyond a timer a busy or loaded machine delays,
 * and the same minute the writer's own stall guard gives a download without a byte.
 */
export const LOCK_QUIET_MS = 60_000;

/**
 * A lock file untouched this long, by this machine's clock, has had no beat for a hundred and
 * twenty in a row: its owner is gone whatever its pid now names, and a pull takes it at once
 * instead of watching it for LOCK_QUIET_MS. Only for a lock of this pid space (this machine's
 * clock beats it); another's is watched (its holder's clock may be off by any amount).
 */
export const LOCK_ABANDONED_MS = 10 * LOCK_QUIET_MS;

/**
 * A process that started this long after a lock's `started` is not the lock's owner (its pid
 * was reused): room for `ps`'s one-second start times and a clock that stepped a little.
 */
const STARTED_AFTER_SLACK_MS = 5_000;

const held = new Set<string>();

/** A lock file still empty after this long was left by a writer that died while creating it. */
const EMPTY_LOCK_GRACE_MS = 10_000;

/** A lock holds a short JSON object; anything larger is not one of ours. */
const LOCK_MAX_BYTES = 4096;

/** Takes the lock, or returns who holds it (null when the file could not be read). */
export function tryLock(path: string, options: LockOptions = {}): HeldLock | { busy: LockOwner | null } {
  for (let attempt = 0; attempt < 3; attempt++) {
    const mine: LockOwner = {
      pid: process.pid,
      id: randomBytes(8).toString("hex"),
      started: Date.now(),
      space: options.space ?? pidSpace(),
    };
    const start = ownStart(options);
    if (start !== null) mine.proc_start = start;
    let fd: number;
    try {
      fd = openSync(path, "wx");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const owner = readOwner(path);
      if (owner === "gone") continue;
      if (!isStale(path, owner, options)) return { busy: owner };
      takeOver(path, owner);
      continue;
    }
    return hold(path, fd, mine, options.heartbeatMs ?? HEARTBEAT_MS);
  }
  return { busy: null };
}

/** The lock is ours: its owner written, its file touched on a beat until it is released. */
function hold(path: string, fd: number, mine: LockOwner, beatMs: number): HeldLock {
  try {
    writeSync(fd, JSON.stringify(mine));
  } catch (err) {
    closeSync(fd);
    rmSync(path, { force: true });
    throw err;
  }
  held.add(mine.id);
  // The descriptor stays open for the beat: it touches our own file even if it was moved aside.
  const beat = setInterval(() => {
    try {
      const now = new Date();
      futimesSync(fd, now, now);
    } catch {
      // A beat that fails (the disk went away) only makes the lock look older to a waiter.
    }
  }, beatMs);
  beat.unref?.();
  let released = false;
  return {
    path,
    release: () => {
      if (released) return;
      released = true;
      clearInterval(beat);
      closeSync(fd);
      release(path, mine.id);
    },
  };
}

/** This process's start time, read once (on Windows it costs a PowerShell call). */
let ownStartTime: { value: string | null } | undefined;
function ownStart(options: LockOptions): string | null {
  if (!options.processStart) return null;
  ownStartTime ??= { value: options.processStart(process.pid) };
  return ownStartTime.value;
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

function isStale(path: string, owner: LockOwner | null, options: LockOptions): boolean {
  if (owner === null) {
    try {
      return Date.now() - statSync(path).mtimeMs > EMPTY_LOCK_GRACE_MS;
    } catch {
      return false;
    }
  }
  // A holder whose pid names no process we can see (another container or machine on this
  // folder, docs/agent.md "Two cores on one data folder"): its beat alone tells, and only on
  // our clock (LockWatch). The file's time is its holder's clock's (futimes): one behind ours by
  // more than LOCK_ABANDONED_MS had its live lock read as abandoned and taken at once.
  // One of this host's previous boot (a crash, a reboot), untouched since this boot began, is
  // gone, whatever its pid names now; one beaten since is another machine's of this name.
  if (typeof owner.space === "string") {
    const touched = statOr(path)?.mtimeMs ?? Number.NaN;
    const where = writtenRelation(owner.space, options.space ?? pidSpace(), touched);
    if (where !== "own") return where === "previous_boot";
  }
  if (owner.pid === process.pid) return !held.has(owner.id);
  if (!pidAlive(owner.pid)) return true;
  const untouched = untouchedFor(path);
  if (untouched > LOCK_ABANDONED_MS) return true;
  // Two beats missed, and the pid's process started after the lock was written: not the owner.
  if (untouched > 2 * HEARTBEAT_MS && startedAfterLock(owner, options)) return true;
  return reusedPid(owner, options);
}

function startedAfterLock(owner: LockOwner, options: LockOptions): boolean {
  if (typeof owner.started !== "number" || !options.processStartedAt) return false;
  const startedAt = options.processStartedAt(owner.pid);
  return startedAt !== null && startedAt > owner.started + STARTED_AFTER_SLACK_MS;
}

/** Live processes already told apart from a lock's owner, by lock id: one look per lock, not per poll. */
const judged = new Map<string, boolean>();

/** The pid is alive, but is it the owner? Not when it started at another time than the one recorded. */
function reusedPid(owner: LockOwner, options: LockOptions): boolean {
  if (owner.proc_start === undefined || !options.processStart) return false;
  const key = `${owner.id}:${owner.pid}`;
  let reused = judged.get(key);
  if (reused === undefined) {
    const now = options.processStart(owner.pid);
    reused = now !== null && now !== owner.proc_start;
    if (judged.size > 256) judged.clear();
    judged.set(key, reused);
  }
  return reused;
}

/**
 * A waiter's view of a busy lock: its sign of life is the lock file's time (the holder's beat)
 * and the partial's size (bytes landing, for a holder that does not beat). `quiet()` is true
 * once neither has moved for `quietMs` of the waiter's own clock (so another machine's clock,
 * on a shared cache, does not count): its monotonic one. By the wall clock, a step forward (NTP)
 * or a suspend (the holder, asleep too, beat nothing meanwhile) read as a minute of silence at
 * the next poll, and a live holder's lock was taken over. Windows' monotonic clock goes on
 * through a suspend too: a gap between two polls (every 500 ms) longer than a beat
 * (HEARTBEAT_MS, or `quietMs` if less) is time the waiter did not see, not counted.
 */
export class LockWatch {
  private sign: string | undefined;
  private since = performance.now();
  private last: number | undefined;

  constructor(
    private readonly path: string,
    private readonly partial: string,
    readonly quietMs: number = LOCK_QUIET_MS,
  ) {}

  quiet(now = performance.now()): boolean {
    const gap = this.last === undefined ? 0 : now - this.last;
    this.last = now;
    // Longer than a beat: the holder, asleep too, may not have beaten yet (a suspend just under
    // `quietMs`, its last beat seconds before, read as a whole minute at the first poll).
    if (gap > Math.min(this.quietMs, HEARTBEAT_MS)) this.since += gap;
    const sign = `${statOr(this.path)?.mtimeMs}:${statOr(this.partial)?.size}`;
    if (sign !== this.sign) {
      this.sign = sign;
      this.since = now;
      return false;
    }
    return now - this.since >= this.quietMs;
  }
}

/** Gives up on a lock judged quiet: moved aside as a stale one, if it is still the one judged. */
export function giveUp(path: string, owner: LockOwner | null): void {
  takeOver(path, owner);
}

/** How long ago the lock file was last touched (its holder's beat); 0 when it cannot be read. */
function untouchedFor(path: string): number {
  const stat = statOr(path);
  return stat ? Date.now() - stat.mtimeMs : 0;
}

function statOr(path: string): Stats | undefined {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** Whether the lock's owner process runs (a zombie does not): platform/pid-alive.ts. */
export { pidAlive as processAlive };

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
