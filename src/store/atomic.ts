import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  fsync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
} from "node:fs";
import { open as openAsync } from "node:fs/promises";
import { dirname } from "node:path";
import { promisify } from "node:util";
import { logger } from "../util/logger.ts";
import { PRIVATE_DIR_MODE, writeAllSync } from "../util/private-fs.ts";
import { createPrivate, FRESH_NAME_TRIES, openFresh } from "./fresh-file.ts";
import { openToZeroChecked, zeroOpenSync } from "./scrub-file.ts";

/**
 * Writes a file so that a crash leaves either the old or the new content, never a torn one:
 * a temp file in the same folder, fsync, rename over the target, then fsync the folder so the
 * rename itself is durable (best-effort where the OS does not allow opening folders).
 * Owner-only: the temp file is created 0600 and the rename keeps that mode; missing folders
 * are created 0700 (tightening existing ones is the stores' call, see util/private-fs.ts).
 */
export function writeFileAtomic(path: string, data: string): void {
  stageFileAtomic(path, data).commit();
}

/** A write whose bytes are in a temp file beside the target, not yet synced or in place. */
export interface StagedWrite {
  /**
   * Syncs the temp file (unless `flush` did), renames it over the target, syncs the folder
   * (unless `folder: false`: the caller's `syncFolderAsync` then). Once; later calls do nothing.
   */
  commit(options?: { folder?: boolean }): void;
  /**
   * The slow half of `commit` off the event loop: the temp file's bytes synced on a worker
   * thread, so the rename that follows, in the caller's own tick, is all that is left.
   */
  flush(): Promise<void>;
  /** Drops the temp file; the target stays as it was. */
  discard(): void;
}

/**
 * The first half of writeFileAtomic: the folder made and the bytes written to the temp file,
 * so a folder or disk that refuses them fails here; the syncs and the rename, the slow part,
 * wait for `commit()`. For a write whose durability may trail by a moment (a turn's first
 * checkpoint, committed once its request is on its way). Until committed, the target is the
 * old file, and a crash leaves the temp file: a caller whose folder is swept names it (`tempName`,
 * a fresh name in the same folder) so that its sweep knows it (agent/kv/kv-disk.ts). `remove`
 * drops the temp file whenever it is not put in place: zeroed before it returns (`dropHeld`, or
 * `dropTemp` once its descriptor is closed) unless the caller brings its own zeroing drop
 * (KvDisk's, waited for by kv-erase.ts `zeroed`).
 */
export function stageFileAtomic(
  path: string,
  data: string,
  tempName?: string,
  remove?: (tmp: string) => void,
): StagedWrite {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // A name found taken is another's file: not ours to remove, another random one is tried (one
  // the caller gives is its own to choose again).
  const { fd, path: tmp } = openFresh(
    dir,
    () => tempName ?? `.${randomBytes(6).toString("hex")}.tmp`,
    createPrivate,
    tempName === undefined ? FRESH_NAME_TRIES : 1,
  );
  try {
    writeAllSync(fd, data);
  } catch (err) {
    if (remove) {
      // A close that fails too (a network disk reports the lost write again) skipped the drop,
      // the temp left with the words, and its error took the write's place (ENOSPC, told apart).
      try {
        closeSync(fd);
      } catch {}
      remove(tmp);
    } else dropHeld(tmp, fd);
    throw err;
  }
  const handle = fd;
  let open: number | undefined = fd;
  const close = () => {
    if (open === undefined) return;
    const f = open;
    open = undefined;
    closeSync(f);
  };
  // Through the descriptor it was written by while that is open: another file renamed onto the
  // name since (rare, the name is fresh) freed the temp's blocks, words in them, had it been
  // opened by name again, and that other file was zeroed and removed in its place.
  const drop = () => {
    if (remove) {
      close();
      remove(tmp);
      return;
    }
    const f = open;
    open = undefined;
    if (f === undefined) dropTemp(tmp);
    else dropHeld(tmp, f);
  };
  let settled = false;
  let flushed = false;
  return {
    async flush() {
      if (settled || flushed) return;
      await fsyncAsync(handle);
      flushed = true;
    },
    commit(options = {}) {
      if (settled) return;
      settled = true;
      try {
        if (!flushed) fsyncSync(handle);
        close();
        // The only step that touches the target: it is the old file until this succeeds.
        renameSync(tmp, path);
      } catch (err) {
        drop();
        throw err;
      }
      if (options.folder !== false) syncFolder(dir);
    },
    discard() {
      if (settled) return;
      settled = true;
      drop();
    },
  };
}

/**
 * A temp file that will not become the target (a refused rename, a write cut short, a discard):
 * its bytes are the caller's words, so it is opened, unlinked, and zeroed through that
 * descriptor before this returns, as every file of words is before it goes (docs/agent.md,
 * "Files of erased words are zeroed before they go"). Synchronous as the write that filled it
 * was, and bounded by it: its one caller, the 0.1 erase (import-v01-erase.ts), runs on the
 * store's thread, whose delete answers as the call returns and which a stop terminates, so a
 * zeroing left to run after it was waited for by neither and could be cut off, the nameless
 * file's words kept. One that cannot be opened for writing is removed all the same; one that
 * cannot be removed is zeroed at its name (said), never thrown over the caller's own error.
 */
function dropTemp(tmp: string): void {
  const fd = openToZeroChecked(tmp);
  if (fd === "changed") {
    // Another file renamed onto the fresh name each time: not the core's to remove unchecked.
    logger.warn(
      `a dropped temp file ${tmp} was replaced by another file each time it was opened: left as it is`,
    );
    return;
  }
  // Names the file still has: one when its unlink is refused (Windows' EPERM while a scanner
  // holds it, a folder made read-only), its words zeroed at that name all the same.
  let names = 0;
  try {
    rmSync(tmp, { force: true });
  } catch (err) {
    names = 1;
    logger.warn(`a dropped temp file ${tmp} could not be removed: ${(err as Error).message}`);
  }
  if (fd === undefined) {
    if (names > 0)
      logger.warn(`a dropped temp file ${tmp} could not be opened to be zeroed either: its words are there`);
    return;
  }
  try {
    zeroOpenSync(fd, names);
  } catch (err) {
    logger.warn(`a dropped temp file could not be zeroed: ${(err as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

/**
 * `dropTemp` through `fd`, the temp's own descriptor (closed here): its name removed only while
 * it is still the temp's (another file renamed there is not the core's), then its bytes zeroed,
 * whatever is at the name now.
 */
function dropHeld(tmp: string, fd: number): void {
  try {
    const own = fstatSync(fd);
    const named = lstatSync(tmp, { throwIfNoEntry: false });
    let names = 0;
    if (named?.dev === own.dev && named.ino === own.ino) {
      try {
        rmSync(tmp, { force: true });
      } catch (err) {
        names = 1;
        logger.warn(`a dropped temp file ${tmp} could not be removed: ${(err as Error).message}`);
      }
    }
    zeroOpenSync(fd, names);
  } catch (err) {
    logger.warn(`a dropped temp file could not be zeroed: ${(err as Error).message}`);
  } finally {
    closeSync(fd);
  }
}

/** Also a file's bytes (store/export-temps.ts): an open for reading and its fsync. */
export function syncFolder(dir: string): void {
  try {
    const dfd = openSync(dir, "r");
    try {
      fsyncSync(dfd);
    } finally {
      closeSync(dfd);
    }
  } catch {
    // Windows cannot open a folder for fsync; the rename is still atomic there.
  }
}

const fsyncAsync = promisify(fsync);

/** `syncFolder` off the event loop. */
export async function syncFolderAsync(dir: string): Promise<void> {
  try {
    const handle = await openAsync(dir, "r");
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Windows cannot open a folder for fsync; the rename is still atomic there.
  }
}

export function writeJsonAtomic(path: string, value: unknown): void {
  writeFileAtomic(path, `${JSON.stringify(value)}\n`);
}
