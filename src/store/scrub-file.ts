import {
  close,
  closeSync,
  constants,
  fstat,
  fstatSync,
  fsync,
  fsyncSync,
  lstatSync,
  open,
  openSync,
  write,
  writeSync,
} from "node:fs";
import { promisify } from "node:util";
import { refuseLink, tookSome } from "../util/private-fs.ts";

const openAsync = promisify(open);
const fstatAsync = promisify(fstat);
const writeAsync = promisify(write);
const fsyncAsync = promisify(fsync);
const closeAsync = promisify(close);

/**
 * A file with a name besides the one the core removes: someone's own (a `cp -al` backup of
 * data_dir shares its blocks), left as it is (docs/agent.md, The store).
 */
export class OtherName extends Error {
  constructor() {
    super("it has another name (a hard link), whose copy is the user's own: left as it is");
  }
}

/** The zeros written at a time: a big file is overwritten a piece a write, the loop free between. */
const PIECE_BYTES = 1 << 20;

/** Opened to be written in place: never through a link, never waiting on a FIFO. */
const ZERO_OPEN = constants.O_RDWR | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

/**
 * A file of a conversation's words about to be removed, overwritten with zeros in place first,
 * then synced: unlinked with its zeros still in memory, the file system drops them unwritten and
 * the old blocks keep the words (docs/agent.md, The store: erased data stays erased). In place,
 * so it needs no free space and works on a full disk; never through a link (ELOOP); by what each
 * write took, as a copy-on-write disk may take part of one. Only a regular file is overwritten.
 * Best effort, as SQLite's `secure_delete` is: a flash or copy-on-write disk may keep old blocks.
 */
export function zeroFileSync(path: string): void {
  const fd = openNoLink(path, ZERO_OPEN);
  try {
    zeroOpenSync(fd, 1);
  } finally {
    closeSync(fd);
  }
}

/**
 * A file about to be unlinked or replaced by a rename, opened to be zeroed through after (never
 * through a link, never waiting on a FIFO); none when it cannot be opened for writing. "changed":
 * another file was at the name after each open (another core renaming onto it), which a caller
 * that unlinks or renames over by name must never take for "cannot be opened": the file there
 * went unzeroed (agent/kv/drop-file.ts leaves the name and says so).
 */
export function openToZeroChecked(path: string, flags = ZERO_OPEN): number | "changed" | undefined {
  try {
    return openNoLink(path, flags);
  } catch (err) {
    return (err as { code?: string }).code === "ECHANGED" ? "changed" : undefined;
  }
}

/** Opens of a name another core keeps renaming its files onto, before that is given up. */
const OPEN_TRIES = 3;

/**
 * `path` opened with `flags`, never through a link: O_NOFOLLOW refuses one on POSIX, but Windows
 * has none (0), and a link or junction planted in data_dir had its target zeroed by an erase. So a
 * link is refused by a look first, and the file opened must be the one at the name after, should
 * a link have been put there between the look and the open. Another file there (another core's
 * rename onto the name, or a link put and taken back: the two look alike) is opened in turn.
 */
function openNoLink(path: string, flags: number): number {
  for (let tries = 1; ; tries++) {
    refuseLink(path);
    const fd = openSync(path, flags);
    let at: boolean;
    try {
      at = isAtName(fd, path);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    if (at) return fd;
    closeSync(fd);
    if (tries >= OPEN_TRIES)
      throw Object.assign(new Error(`${path} was replaced by another file each time it was opened`), {
        code: "ECHANGED",
        path,
      });
  }
}

/**
 * Whether `fd` is the file at `path`; throws ELOOP where a link is there now (one was followed),
 * ENOENT where nothing is.
 */
function isAtName(fd: number, path: string): boolean {
  const opened = fstatSync(fd);
  const named = lstatSync(path);
  if (named.isSymbolicLink())
    throw Object.assign(new Error(`ELOOP: ${path} was a link when opened, which the core does not follow`), {
      code: "ELOOP",
      path,
    });
  return named.dev === opened.dev && named.ino === opened.ino;
}

/**
 * `zeroFileSync` through a descriptor opened before: a file replaced by a rename (the old one's
 * blocks keep what the new one left out) is zeroed after, its old name gone, no other file touched.
 * `names`: the names it may still have, the caller's (none once unlinked or renamed over).
 */
export function zeroOpenSync(fd: number, names = 0): void {
  const stats = fstatSync(fd);
  if (!stats.isFile()) return;
  refuseShared(stats.nlink, names);
  const zeros = Buffer.alloc(Math.min(stats.size, PIECE_BYTES));
  for (let at = 0; at < stats.size; )
    at += tookSome(writeSync(fd, zeros, 0, Math.min(zeros.length, stats.size - at), at));
  fsyncSync(fd);
}

/** A file as the file system knows it: the one found at a name is zeroed only if it is this one. */
export interface FileIdentity {
  dev: number;
  ino: number;
}

/**
 * `zeroFileSync` with its writes and sync off the event loop: a file of any size holds no ping.
 * `only`: the file that was written, found again by its name once closed; another put at that
 * name meanwhile (a second name of someone's own file) is left as it is.
 */
export async function zeroFile(path: string, only?: FileIdentity): Promise<void> {
  refuseLink(path);
  const fd = await openAsync(path, ZERO_OPEN);
  let at: boolean;
  try {
    at = isAtName(fd, path);
  } catch (err) {
    await closeAsync(fd).catch(() => {});
    throw err;
  }
  // Another file at the name since the write (`only`'s case): not the core's to zero.
  if (!at) {
    await closeAsync(fd).catch(() => {});
    return;
  }
  await zeroOpen(fd, { only, names: 1 });
}

export interface ZeroOptions {
  /** As zeroFile's. */
  only?: FileIdentity | undefined;
  /** Checked before each piece, its reason thrown (a file zeroed at its name, which a next start zeroes again, need not hold up a shutdown). */
  stop?: AbortSignal;
  /** As zeroOpenSync's: 0 unless given. */
  names?: number;
}

/** `zeroOpenSync` off the event loop; the descriptor is closed whatever happens. */
export async function zeroOpen(fd: number, o: ZeroOptions = {}): Promise<void> {
  const { only, stop } = o;
  try {
    const stats = await fstatAsync(fd);
    if (!stats.isFile() || (only && (stats.dev !== only.dev || stats.ino !== only.ino))) return;
    refuseShared(stats.nlink, o.names ?? 0);
    const zeros = Buffer.alloc(Math.min(stats.size, PIECE_BYTES));
    for (let at = 0; at < stats.size; ) {
      stop?.throwIfAborted();
      const { bytesWritten } = await writeAsync(fd, zeros, 0, Math.min(zeros.length, stats.size - at), at);
      at += tookSome(bytesWritten);
    }
    await fsyncAsync(fd);
  } finally {
    await closeAsync(fd).catch(() => {});
  }
}

/**
 * Zeroed only as the core's alone: another name's blocks are not freed by the core's unlink, and
 * zeroing them destroyed that copy (a user's backup); its words are where the user put them. On
 * Windows a file unlinked while a handle holds it open may still count its name (delete pending,
 * or moved to NTFS's `$Deleted`): there one more is allowed once it has none, else nothing would
 * ever be zeroed there; a hard-link backup of data_dir on Windows loses that file's copy.
 */
export function refuseShared(nlink: number, names: number, platform = process.platform): void {
  const pending = platform === "win32" && names === 0 ? 1 : 0;
  if (nlink > names + pending) throw new OtherName();
}
