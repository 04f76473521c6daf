import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readSync,
  type Stats,
  statSync,
} from "node:fs";
import { lstat, open, stat } from "node:fs/promises";

/**
 * Reads of files the user or another program controls (the config, a model, the Hugging Face
 * cache's refs, a token, a lock), none of which may block the core: a FIFO blocks an open until
 * a writer comes (forever, and the whole core with it: ping, shutdown and SIGTERM go
 * unanswered), and a device like /dev/zero never ends. So a file is read only when it is a
 * regular file: stat() decides before opening (links followed, as the cache's snapshot links
 * need), the open does not block (O_NONBLOCK), and fstat() of what was opened decides again, so
 * a FIFO swapped in between is refused before any read.
 */

/** The path (links followed) is not a regular file: `kind` says what it is ("a FIFO"…). */
export class NotRegularFile extends Error {
  constructor(
    readonly path: string,
    readonly kind: string,
  ) {
    super(`${path} is not a regular file (${kind})`);
    this.name = "NotRegularFile";
  }
}

/** The file is longer than the reader takes. */
export class FileTooLarge extends Error {
  constructor(
    readonly path: string,
    readonly bytes: number,
    readonly max: number,
  ) {
    super(`${path} is ${bytes} bytes, over the limit of ${max} bytes`);
    this.name = "FileTooLarge";
  }
}

const NONBLOCK = constants.O_NONBLOCK ?? 0;
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

export interface ReadOptions {
  /** Whether a link (the path's last part) is followed; on unless said (a `memory.folders` file: not). */
  follow?: boolean;
  /** The only user (uid) whose file is read: another's, as opened, throws NotOwnFile. */
  owner?: number;
}

/** The file, as opened, belongs to another user than `ReadOptions.owner`. */
export class NotOwnFile extends Error {
  constructor(
    readonly path: string,
    readonly uid: number,
  ) {
    super(`${path} belongs to another user (uid ${uid})`);
    this.name = "NotOwnFile";
  }
}

/**
 * A regular file opened for reading, never blocking; the caller closes `fd`. Throws
 * NotRegularFile, or the OS error (ENOENT…) as it came.
 */
export function openRegularFile(path: string, options: ReadOptions = {}): { fd: number; size: number } {
  const follow = options.follow ?? true;
  refuseIrregular(path, follow ? statSync(path) : lstatSync(path));
  // Not following: a link swapped in after the lstat fails the open (ELOOP) rather than being read.
  const fd = openSync(path, constants.O_RDONLY | NONBLOCK | (follow ? 0 : NOFOLLOW));
  try {
    const stats = fstatSync(fd);
    refuseIrregular(path, stats);
    if (options.owner !== undefined && stats.uid !== options.owner) throw new NotOwnFile(path, stats.uid);
    return { fd, size: stats.size };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}

/** A small file's text (a ref, a token, a lock), read whole: NotRegularFile, FileTooLarge or the OS error. */
export function readSmallFile(path: string, maxBytes: number, options: ReadOptions = {}): string {
  return readSmallFileBytes(path, maxBytes, options).toString("utf8");
}

/** As readSmallFile, the bytes as they are (a caller that decodes them itself). */
export function readSmallFileBytes(path: string, maxBytes: number, options: ReadOptions = {}): Buffer {
  const { fd, size } = openRegularFile(path, options);
  try {
    if (size > maxBytes) throw new FileTooLarge(path, size, maxBytes);
    // Room for the file's size (not the cap: a pid record of 300 bytes read with an 8 MiB cap
    // cost 8 MiB each); read to the end, stopping past the cap, in case the file grew after the
    // fstat (or, as /proc files do, says 0 bytes and has more).
    const parts: Buffer[] = [];
    let length = 0;
    for (let room = size + 1; length <= maxBytes; room = 1 << 16) {
      const part = Buffer.alloc(Math.min(room, maxBytes + 1 - length));
      const n = readSync(fd, part, 0, part.length, null);
      if (n === 0) break;
      parts.push(part.subarray(0, n));
      length += n;
    }
    if (length > maxBytes) throw new FileTooLarge(path, length, maxBytes);
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, length);
  } finally {
    closeSync(fd);
  }
}

/**
 * The same read off the event loop (many files, as `memory.folders` has): the same checks
 * (stat, a non-blocking open, fstat), the reads awaited. NotRegularFile, FileTooLarge or the OS error.
 */
export async function readSmallFileAsync(
  path: string | Buffer,
  maxBytes: number,
  options?: ReadOptions,
): Promise<string> {
  const bytes = await readFileBytesAsync(path, maxBytes, options);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
}

/**
 * A file's bytes off the event loop, with the same checks; a file over `maxBytes` by its first
 * stat is refused before it is even opened (a document of 1 GB costs nothing to refuse). `at`
 * may be bytes (a `memory.folders` name that is not UTF-8: store/folder-names.ts); errors name it as text.
 */
export async function readFileBytesAsync(
  at: string | Buffer,
  maxBytes: number,
  options: ReadOptions = {},
): Promise<Uint8Array> {
  const path = String(at);
  const follow = options.follow ?? true;
  const first = await (follow ? stat(at) : lstat(at));
  refuseIrregular(path, first);
  if (first.size > maxBytes) throw new FileTooLarge(path, first.size, maxBytes);
  // Not following: a link swapped in after the lstat fails the open (ELOOP) rather than being read.
  const handle = await open(at, constants.O_RDONLY | NONBLOCK | (follow ? 0 : NOFOLLOW));
  try {
    const stats = await handle.stat();
    refuseIrregular(path, stats);
    if (options.owner !== undefined && stats.uid !== options.owner) throw new NotOwnFile(path, stats.uid);
    if (stats.size > maxBytes) throw new FileTooLarge(path, stats.size, maxBytes);
    // Read to the end, stopping past the cap, in case the file grew after the fstat (or, as
    // some regular files do, says 0 bytes and has more).
    const parts: Buffer[] = [];
    let length = 0;
    for (let room = stats.size + 1; length <= maxBytes; room = 1 << 20) {
      const part = Buffer.alloc(Math.min(room, maxBytes + 1 - length));
      const { bytesRead } = await handle.read(part, 0, part.length, null);
      if (bytesRead === 0) break;
      parts.push(part.subarray(0, bytesRead));
      length += bytesRead;
    }
    if (length > maxBytes) throw new FileTooLarge(path, length, maxBytes);
    return parts.length === 1 ? (parts[0] as Buffer) : Buffer.concat(parts, length);
  } finally {
    await handle.close();
  }
}

function refuseIrregular(path: string, stats: Stats): void {
  if (!stats.isFile()) throw new NotRegularFile(path, kindOf(stats));
}

/** What a path that is not a regular file is, in words. */
export function kindOf(stats: Stats): string {
  if (stats.isDirectory()) return "a directory";
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  if (stats.isSocket()) return "a socket";
  if (stats.isSymbolicLink()) return "a symbolic link";
  return "not a file";
}

const OS_REASONS: Record<string, string> = {
  ENOENT: "no such file",
  ENOTDIR: "a folder on its path is not a folder",
  EACCES: "permission denied",
  EPERM: "permission denied",
  ELOOP: "a loop of symbolic links",
  ENAMETOOLONG: "the path is too long",
  EISDIR: "a directory",
  // Node's own check of a path holding a NUL character (no file name can).
  ERR_INVALID_ARG_VALUE: "the path holds a NUL character",
};

/**
 * The process (EMFILE) or the system (ENFILE) has used up its open files: a failure that says
 * nothing of the file, which may be there and readable a moment later.
 */
export function outOfOpenFiles(err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  return code === "EMFILE" || code === "ENFILE";
}

/** Why a read of a file failed, in words a person acts on (the OS's code, else the message). */
export function readFailure(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return (code && OS_REASONS[code]) ?? (err instanceof Error ? err.message : String(err));
}
