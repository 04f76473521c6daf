import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { lstat, mkdir, open, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { kindOf, NotRegularFile } from "./read-file.ts";

/**
 * Owner-only modes for what the core keeps under data_dir: folder names are user and session
 * ids, files hold conversations and llama-server's log. POSIX only; Windows ignores these bits
 * (a folder there inherits the ACL of the profile it lives in).
 *
 * Links: data_dir itself may be a link the user made, but what the core makes inside it is
 * never followed (docs/architecture.md, Process rules): a folder or file found there as a
 * symbolic link is refused (ELOOP), so a planted link cannot make the core chmod or write
 * somewhere else.
 */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

const tightens = process.platform !== "win32";
/** 0 where the OS has no such flag (Windows: there the lstat checks alone guard). */
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const DIRECTORY = constants.O_DIRECTORY ?? 0;
/** On a FIFO with no reader, the open fails (ENXIO) rather than waiting; no effect on a regular file. */
const NONBLOCK = constants.O_NONBLOCK ?? 0;

/**
 * Creates `dir` (and missing parents) owner-only, and tightens `dir` itself if it already
 * exists with group or other bits (an older version made it 0755). Call it only on a folder
 * the core owns inside data_dir: existing parents are never changed, and `dir` being a link
 * is refused, never followed.
 */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  refuseLink(dir);
  if (!tightens) return;
  // Opened without following, so the folder tightened is the one just checked.
  let fd: number;
  try {
    fd = openSync(dir, constants.O_RDONLY | DIRECTORY | NOFOLLOW);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw err;
    return; // A folder this user cannot read keeps its mode; using it decides.
  }
  try {
    tightenOpen(fd, PRIVATE_DIR_MODE);
  } finally {
    closeSync(fd);
  }
}

/**
 * `base/seg1/seg2/…` with every segment owner-only (each tightened as in ensurePrivateDir).
 * `base` is the user's data_dir: created owner-only when missing, left as it is when it exists
 * (a link there is the user's choice and is followed).
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
  if (tightens) tightenOpen(fd, PRIVATE_FILE_MODE);
}

/**
 * Opens a file of the core's owner-only, never through a link: `flags` as Node's numeric
 * `fs.constants` (O_CREAT and friends), O_NOFOLLOW added; a link there fails with ELOOP.
 * Never blocking, and a regular file only: a FIFO planted at the name blocked the open for good
 * (the store's open, at its reserve) with no reader, and with one took what was written.
 */
export function openPrivateFile(path: string, flags: number): number {
  refuseLink(path);
  const fd = openSync(path, flags | NOFOLLOW | NONBLOCK, PRIVATE_FILE_MODE);
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new NotRegularFile(path, kindOf(stats));
    tightenOpenFile(fd);
  } catch (err) {
    closeSync(fd);
    throw err;
  }
  return fd;
}

/**
 * Tightens a file of the core's that exists with group or other bits (one copied back from a
 * backup under a 022 umask), never through a link; a missing or unreadable one is left alone.
 */
export function tightenExistingFile(path: string): void {
  if (!tightens) return;
  refuseLink(path);
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | NOFOLLOW | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw err;
    return;
  }
  try {
    if (fstatSync(fd).isFile()) tightenOpen(fd, PRIVATE_FILE_MODE);
  } finally {
    closeSync(fd);
  }
}

/** Writes (creating or replacing the content of) an owner-only file, never through a link. */
export function writePrivateFile(path: string, data: string): void {
  const fd = openPrivateFile(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC);
  try {
    writeAllSync(fd, data);
  } finally {
    closeSync(fd);
  }
}

/**
 * `data` written owner-only to `tmp`, then renamed over `dest`: a crash mid-write leaves the old
 * file or the new one, never half of one; the temp is removed when either step fails.
 */
export function replacePrivateFile(tmp: string, dest: string, data: string): void {
  try {
    writePrivateFile(tmp, data);
    renameSync(tmp, dest);
  } catch (err) {
    // A full disk makes the temp file and refuses its bytes: only the old file is left.
    rmSync(tmp, { force: true });
    throw err;
  }
}

/**
 * All of `data` written at the file's offset, or a throw. A disk with less room than the write
 * needs takes what fits and answers its count; only the next write fails (ENOSPC, EFBIG). One
 * writeSync alone would leave the rest unwritten without a word, and a temp file renamed in whole.
 */
export function writeAllSync(fd: number, data: string | Uint8Array): void {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  for (let at = 0; at < bytes.length; ) at += tookSome(writeSync(fd, bytes, at, bytes.length - at));
}

/**
 * A write's count, or a throw for none: a file system that takes nothing and says no error (a
 * FUSE mount) would otherwise keep a loop that writes "until all is taken" going for good.
 */
export function tookSome(written: number): number {
  if (written > 0) return written;
  throw Object.assign(new Error("ENOSPC: the disk took no bytes of a write"), { code: "ENOSPC" });
}

/** Throws ELOOP when `path` is a symbolic link; a missing path is fine (it is created next). */
export function refuseLink(path: string): void {
  let link = false;
  try {
    link = lstatSync(path).isSymbolicLink();
  } catch {
    return;
  }
  if (link) throw linkRefused(path);
}

/** The ELOOP a link where the core writes is refused with. */
function linkRefused(path: string): Error {
  return Object.assign(new Error(`ELOOP: ${path} is a symbolic link, which the core does not follow`), {
    code: "ELOOP",
    path,
  });
}

function tightenOpen(fd: number, allowed: number): void {
  const mode = fstatSync(fd).mode & 0o777;
  if (!(mode & 0o077)) return;
  try {
    fchmodSync(fd, mode & allowed);
  } catch {
    // Not ours to change (another owner, a read-only mount): the write itself still decides.
  }
}

/**
 * ensurePrivateTree off the event loop (a data_dir on a slow or remote drive held ping and
 * cancel in each synchronous call): each segment made owner-only, refused as a link, tightened.
 * `keep` is asked before each folder is made: null, and none made, once it says no more (a core
 * stopping meanwhile: its data_dir may be removed, and a recursive mkdir would make it again).
 */
export async function ensurePrivateTreeAsync(
  base: string,
  segments: readonly string[],
  keep: () => boolean,
): Promise<string | null> {
  await mkdir(base, { recursive: true, mode: PRIVATE_DIR_MODE });
  let dir = base;
  for (const segment of segments) {
    dir = join(dir, segment);
    if (!keep()) return null;
    await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    await refuseLinkAsync(dir);
    if (!tightens) continue;
    const handle = await open(dir, constants.O_RDONLY | DIRECTORY | NOFOLLOW).catch(
      (err: NodeJS.ErrnoException) => {
        if (err.code === "ELOOP") throw err;
        return null; // A folder this user cannot read keeps its mode; using it decides.
      },
    );
    if (!handle) continue;
    try {
      const mode = (await handle.stat()).mode & 0o777;
      if (mode & 0o077) await handle.chmod(mode & PRIVATE_DIR_MODE).catch(() => {});
    } finally {
      await handle.close();
    }
  }
  return dir;
}

/**
 * replacePrivateFile off the event loop: `data` written owner-only to `tmp` (never through a
 * link, a regular file only), then renamed over `dest` unless `keep` says no more (asked before
 * the temp is made and before the rename); the temp is removed when a step fails or the write is
 * dropped. True when `dest` was replaced.
 */
export async function replacePrivateFileAsync(
  tmp: string,
  dest: string,
  data: string,
  keep: () => boolean,
): Promise<boolean> {
  try {
    await refuseLinkAsync(tmp);
    if (!keep()) return false;
    const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | NOFOLLOW | NONBLOCK;
    const handle = await open(tmp, flags, PRIVATE_FILE_MODE);
    try {
      const stats = await handle.stat();
      if (!stats.isFile()) throw new NotRegularFile(tmp, kindOf(stats));
      if (tightens && stats.mode & 0o077)
        await handle.chmod(stats.mode & 0o777 & PRIVATE_FILE_MODE).catch(() => {});
      const bytes = Buffer.from(data);
      for (let at = 0; at < bytes.length; )
        at += tookSome((await handle.write(bytes, at, bytes.length - at)).bytesWritten);
    } finally {
      await handle.close();
    }
    if (!keep()) {
      await rm(tmp, { force: true });
      return false;
    }
    await rename(tmp, dest);
    return true;
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

/** refuseLink off the event loop. */
async function refuseLinkAsync(path: string): Promise<void> {
  const stats = await lstat(path).catch(() => null);
  if (stats?.isSymbolicLink()) throw linkRefused(path);
}
