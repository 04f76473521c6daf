import { closeSync, fstatSync, lstatSync, unlinkSync } from "node:fs";
import { isAlive } from "../../runtime/proc-info.ts";
import { openToZeroChecked, zeroOpen } from "../../store/scrub-file.ts";
import { logger } from "../../util/logger.ts";

// The KV state folder's removals (kv-disk.ts), which never throw into a turn or a save.

/** Whether the writer of a temporary file runs: this core, or a live process (proc-info.ts). */
export const alive = (pid: number) => pid === process.pid || isAlive(pid);

/**
 * Removes a file of ours, never throwing: a directory (or anything else) in its place is left
 * where it is, and said once; a folder that is not one (ENOTDIR) has nothing to remove. False
 * when the file is still there. With `zeroes`, the file (a session's tokens, or its prompt
 * record's notes) is opened first and zeroed through that descriptor once its name is gone,
 * off the event loop (a state file can be hundreds of MB): unlinked alone, its blocks keep the
 * words (docs/agent.md, The store).
 */
export function dropFile(path: string, zeroes?: Zeroes): boolean {
  let fd: number | typeof MOVING | undefined;
  try {
    if (lstatSync(path).isDirectory()) {
      logger.warn(`${path} is a directory where a KV state file belongs: left as it is`);
      return true;
    }
    if (zeroes) fd = openAtName(path, zeroes);
    if (fd === MOVING) {
      logger.warn(`${path} was replaced by another file each time it was opened: left for a later removal`);
      return false;
    }
    unlinkSync(path);
    if (zeroes && fd === undefined) logger.warn(`${path} was removed but not zeroed: it could not be opened`);
  } catch (err) {
    if (typeof fd === "number") closeSync(fd);
    const code = (err as { code?: string }).code;
    if (code === "ENOENT" || code === "ENOTDIR") return true;
    logger.warn(`${path} could not be removed: ${(err as Error).message}`);
    return false;
  }
  if (typeof fd === "number") zeroes?.zero(fd, path);
  return true;
}

/**
 * Commits `replace`, a rename onto `path` (a session's next save, its sidecar rewritten), the file
 * it replaces opened first and zeroed through that descriptor after: renamed over, its blocks keep
 * the earlier turns' tokens as an unlinked one's do, past any later erase of the session
 * (docs/agent.md, The store). A rename that throws leaves the old file as it was.
 */
export function replaceZeroed(
  path: string,
  zeroes: Zeroes,
  replace: { commit(options?: { folder?: boolean }): void; discard?(): void },
  options?: { folder?: boolean },
): void {
  const fd = openAtName(path, zeroes);
  // Another core's save put there after each open: not renamed over unzeroed (the caller's own
  // file is dropped instead, a staged one discarded here, and the other core's left).
  if (fd === MOVING) {
    replace.discard?.();
    throw new Error(`${path} was replaced by another file each time it was opened`);
  }
  try {
    replace.commit(options);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    throw err;
  }
  if (fd !== undefined) zeroes.zero(fd, path);
}

/** Opens of a name whose file another core keeps renaming over, before it is left as it is. */
const SWAPS = 3;
/** `openAtName` found another file at the name after each of its opens. */
const MOVING = Symbol("moving");

/**
 * `path` opened to be zeroed, still the file at that name: another core renaming its fresh save
 * of the session onto the name after the open had that save unlinked unzeroed, its tokens left in
 * the blocks after an erase. The one opened (nameless now) is zeroed, and the new one opened in
 * turn, up to `SWAPS` times (then `MOVING`: the name is left, never unlinked unchecked); the look
 * and the unlink are not one step, a window we accept (docs/agent.md, The store).
 */
function openAtName(path: string, zeroes: Zeroes): number | typeof MOVING | undefined {
  for (let tries = 1; ; tries++) {
    // Swapped inside the open's own check too (ECHANGED): never taken for a file that cannot be opened.
    const fd = openToZeroChecked(path);
    if (fd === "changed") return MOVING;
    if (fd === undefined || stillAt(fd, path)) return fd;
    zeroes.zero(fd, path);
    if (tries >= SWAPS) return MOVING;
  }
}

/** Whether `fd` is the file at `path` (gone: the unlink tells). */
function stillAt(fd: number, path: string): boolean {
  let named: { dev: number; ino: number };
  try {
    named = lstatSync(path);
  } catch {
    return true;
  }
  const opened = fstatSync(fd);
  return named.dev === opened.dev && named.ino === opened.ino;
}

/**
 * The zeroing of the files a folder's removals took, off the event loop. A file llama-server may
 * still be writing or reading (`writing`: a save's temporary file, a restore's state file, of this
 * core) is zeroed only once that save or restore is over (`settled`): zeroed before, what the
 * server wrote after would stay in the file's blocks, or a restore would read zeros. A parked
 * one counts as under way from its removal (`done` waits for it): its name is gone, so once the
 * core quits nothing reaches its blocks again.
 */
export class Zeroes {
  private readonly pending = new Set<Promise<void>>();
  /** Per path, the saves or restores on it not yet settled, and the zeroings parked until then. */
  private readonly writing = new Map<string, { users: number; parked: Array<() => void> }>();

  /**
   * A save (or restore) of this core writes (or reads) `path` from now until `settled(path)`.
   * Counted: two restores of one file overlap (one that did not answer reads on until its erase
   * answers, restore-state.ts, while the next turn restores it on another slot).
   */
  begin(path: string): void {
    const w = this.writing.get(path);
    if (w) w.users++;
    else this.writing.set(path, { users: 1, parked: [] });
  }

  /** A save or restore of `path` is over: once none is left, a removal parked meanwhile is zeroed. */
  settled(path: string): void {
    const w = this.writing.get(path);
    if (!w) return;
    w.users -= 1;
    if (w.users > 0) return;
    this.writing.delete(path);
    for (const go of w.parked) go();
  }

  /**
   * `remove(path)` for each path `picks` of the saves of this core under way, once that save is
   * over, `done` waiting for it and its zeroing: a save asked before an erase whose task had not run
   * yet had no file for the erase to find, and llama-server wrote it after (docs/agent.md, The store).
   */
  removeOnceSettled(picks: (path: string) => boolean, remove: (path: string) => void): void {
    for (const [path, { parked }] of this.writing) {
      if (!picks(path)) continue;
      const removed = Promise.withResolvers<void>();
      // Run within `settled`, before the save's own code goes on (its discard, its commit).
      parked.push(() => removed.resolve(this.within(() => remove(path))));
      const work = removed.promise.finally(() => this.pending.delete(work));
      this.pending.add(work);
    }
  }

  zero(fd: number, path: string): void {
    const parked = this.writing.get(path)?.parked;
    this.track(parked ? new Promise<void>((go) => parked.push(go)) : Promise.resolve(), fd, path);
  }

  /**
   * Runs `act`; resolves once the zeroings it started (parked ones included) are done: a delete
   * waits for its own files only, not for another session's removal parked behind a save that
   * did not answer (docs/agent.md, The store).
   */
  within(act: () => void): Promise<void> {
    const before = new Set(this.pending);
    act();
    return Promise.all([...this.pending].filter((p) => !before.has(p))).then(() => {});
  }

  /**
   * `work` (an erase going on over turns of the loop, kv-disk.ts) counted as under way until it
   * ends; one that fails is told to `failed` before it counts as over (only logged, its delete
   * answered ok over files it may have left).
   */
  hold(work: Promise<void>, failed?: (err: Error) => void): void {
    const held = work
      .catch((err) => {
        logger.warn(`a KV state erase failed: ${(err as Error).message}`);
        failed?.(err as Error);
      })
      .finally(() => this.pending.delete(held));
    this.pending.add(held);
  }

  /** Every zeroing under way now finished, parked ones included (shutdown waits on it). */
  async done(): Promise<void> {
    await Promise.all([...this.pending]);
  }

  private track(after: Promise<void>, fd: number, path: string): void {
    const work = after
      .then(() => zeroOpen(fd))
      .catch((err) => logger.warn(`${path} was removed but could not be zeroed: ${(err as Error).message}`))
      .finally(() => this.pending.delete(work));
    this.pending.add(work);
  }
}
