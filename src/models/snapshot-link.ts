import {
  closeSync,
  createReadStream,
  createWriteStream,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { open } from "node:fs/promises";
import { basename, dirname, relative } from "node:path";
import { pipeline } from "node:stream/promises";
import { CoreError } from "../protocol/errors.ts";
import { openFresh } from "../store/fresh-file.ts";
import { liveTemps, snapshotTemp, sweepDeadTemps } from "./snapshot-temps.ts";

/**
 * The cache's names for a downloaded blob, written so that a reader never sees a half-made
 * one: a snapshot entry is made beside its final name and renamed into place.
 */

export type MakeSymlink = (target: string, path: string) => void;

/** The two ways of naming the blob without copying it; tests replace them. */
export interface LinkMakers {
  symlink?: MakeSymlink | undefined;
  hardlink?: MakeSymlink | undefined;
  /** The copy's flush to the drive (an fsync); tests watch it. */
  flushCopy?: ((path: string) => Promise<void>) | undefined;
  /** The pull's cancel: it ends a copy (gigabytes) at once, leaving no entry. */
  signal?: AbortSignal | undefined;
}

const defaultSymlink: MakeSymlink = (target, path) => symlinkSync(target, path);
const defaultHardlink: MakeSymlink = (target, path) => linkSync(target, path);

/**
 * `snapshots/<commit>/<file>` → the blob, as a relative link (the cache folder can move). Where
 * symbolic links cannot be made (Windows without developer mode) a hard link names the same
 * bytes, which NTFS allows anyone: a copy would take the model's size twice, past what the
 * space check counted. Only where neither works (FAT, some network drives) is the blob copied,
 * as huggingface_hub does: off the event loop, since a model is gigabytes and the core must
 * keep answering meanwhile. Returns how it was made.
 */
export async function linkSnapshot(
  blob: string,
  pointer: string,
  links: LinkMakers = {},
): Promise<"link" | "hardlink" | "copy"> {
  const already = namingBlob(pointer, blob);
  if (already) return already;
  mkdirSync(dirname(pointer), { recursive: true });
  sweepDeadTemps(dirname(pointer));
  const temp = snapshotTemp(dirname(pointer));
  const ways: ["link" | "hardlink", () => void][] = [
    ["link", () => (links.symlink ?? defaultSymlink)(relative(dirname(pointer), blob), temp)],
    ["hardlink", () => (links.hardlink ?? defaultHardlink)(blob, temp)],
  ];
  for (const [how, make] of ways) {
    try {
      make();
    } catch (err) {
      // A link refused made nothing: what is at its name (EEXIST, or put there since) is not ours.
      if (!linksUnsupported(err)) throw err;
      continue;
    }
    // Only the making of a link says whether links work here: a refused rename (Windows: the
    // entry is a copy llama-server has open, EPERM) refuses the next way and a copy alike.
    try {
      renameSync(temp, pointer);
    } finally {
      // A hard link renamed onto a name of the same file: POSIX rename() does nothing and the
      // temp stays, a hidden name keeping the model on disk once the blob goes.
      rmSync(temp, { force: true });
    }
    return how;
  }
  // Created before the copy's clean-up can run: a name found taken (EEXIST) is another's, left.
  const fd = openSync(temp, "wx");
  liveTemps.add(temp);
  try {
    await copyBlob(blob, fd, links.signal);
    await flushed(links.flushCopy ?? flushFile, temp);
    // A cancel during the flush (seconds on a USB drive) leaves no entry either.
    links.signal?.throwIfAborted();
    renameSync(temp, pointer);
    return "copy";
  } catch (err) {
    rmSync(temp, { force: true });
    if (links.signal?.aborted) throw copyCancelled(blob);
    throw err;
  } finally {
    liveTemps.delete(temp);
  }
}

/**
 * A cancel during the copy or its flush: the blob is whole and verified, only the entry is left
 * to make. Its sizes say so (`bytes_done` = `total`), as download.ts's cancel during the blob's
 * flush does: without them the CLI said "the partial download is kept … to resume".
 */
function copyCancelled(blob: string): CoreError {
  let size: number | undefined;
  try {
    size = statSync(blob).size;
  } catch {
    // Gone meanwhile: the cancel is said without sizes.
  }
  return new CoreError(
    "cancelled",
    "the pull was cancelled while its snapshot's copy was made; the downloaded file is kept",
    size === undefined ? undefined : { bytes_done: size, total: size },
  );
}

/**
 * The blob copied to the temp opened as `fd` as a stream a cancel ends: copyFile cannot be stopped, so a cancel
 * waited for all of a model copied to a USB drive, and the pull then went on as if not cancelled.
 */
async function copyBlob(blob: string, fd: number, signal: AbortSignal | undefined): Promise<void> {
  // Opened by the caller, not by the stream's own later open: one landing after a cancel's cleanup left the temp behind.
  const to = createWriteStream("", { fd });
  const from = createReadStream(blob, { highWaterMark: 1024 * 1024 });
  await pipeline(from, to, ...(signal ? [{ signal }] : []));
}

/**
 * The copy's bytes on the drive before its rename names it the model. Copies are made on FAT and
 * exFAT (no links), often a USB drive: written at disk speed through the page cache, gigabytes
 * were still unwritten when the pull said done, and a drive unplugged then (or a power cut: FAT
 * has no journal) left the model's name on a short file. Opened for writing: Windows flushes
 * only through such a handle.
 */
export async function flushFile(path: string): Promise<void> {
  const handle = await open(path, "r+");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * A file system with no flush (some FUSE and network ones) refuses fsync so: the copy is as good
 * as it can be made there. Any other failure (EIO: bytes the drive lost) fails the copy.
 */
export async function flushed(flush: (path: string) => Promise<void>, path: string): Promise<void> {
  try {
    await flush(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== "EINVAL" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw err;
  }
}

/**
 * How `pointer` names the blob already (a pull again), or null. Such an entry is left as it is,
 * as huggingface_hub leaves an existing one: Windows refuses to replace a name of a file open
 * without FILE_SHARE_DELETE (llama-server's model), and the refusal read as "no links here"
 * ended in a copy of gigabytes whose rename failed too. A copy is made again: it is another file.
 */
function namingBlob(pointer: string, blob: string): "link" | "hardlink" | null {
  try {
    const [at, target] = [statSync(pointer, { bigint: true }), statSync(blob, { bigint: true })];
    if (at.ino === 0n || at.dev !== target.dev || at.ino !== target.ino) return null;
    return lstatSync(pointer).isSymbolicLink() ? "link" : "hardlink";
  } catch {
    return null;
  }
}

/**
 * Refusals that mean "no links here". Bun names Linux's EOPNOTSUPP "ENOTSUP" (a CIFS share's
 * symbolic links), and Windows' ERROR_INVALID_FUNCTION, CreateHardLinkW's answer on a FAT32 or
 * exFAT drive, "EISDIR" (as libuv does): neither names a real folder problem for a link's making.
 */
const NO_LINKS = new Set(["EPERM", "EOPNOTSUPP", "ENOTSUP", "ENOSYS", "EINVAL", "EISDIR"]);

function linksUnsupported(err: unknown): boolean {
  return NO_LINKS.has(String((err as NodeJS.ErrnoException).code));
}

/**
 * `refs/<revision>` holds the commit the revision pointed to (no newline, as huggingface_hub
 * writes it). Its temp is named and swept as a snapshot entry's (snapshot-temps.ts): a core
 * killed between write and rename left it for good. No git ref name starts with '.', so a
 * temp's name is never a real ref's. `tempOf`: a fresh temp's path (tests give taken ones).
 */
export function writeRef(refFile: string, commit: string, tempOf = snapshotTemp): void {
  mkdirSync(dirname(refFile), { recursive: true });
  sweepDeadTemps(dirname(refFile));
  // Created fresh, never through a link: a name found taken is another's file (another core's
  // temp, a link planted there), which was written over, renamed as the ref and removed.
  const { fd, path: temp } = openFresh(
    dirname(refFile),
    () => basename(tempOf(dirname(refFile))),
    (t) => openSync(t, "wx"),
  );
  try {
    try {
      writeFileSync(fd, commit);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, refFile);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}
