import { closeSync, constants, fstatSync, ftruncateSync, openSync, rmSync } from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import type { ProgressReporter } from "./progress.ts";
import { type PullWhere, pullError, writeFailure } from "./pull-errors.ts";
import type { StallGuard } from "./stall-guard.ts";
import type { TailHash } from "./tail-hash.ts";

/** One response body on its way into the partial file: what both ways of writing it share. */
export interface BodyWrite {
  response: Response;
  /** The partial file (`<blob>.incomplete`). */
  path: string;
  /** The size the hub lists: more is refused, less is a cut connection. */
  size: number;
  /** Told how far the bytes on disk reach, so it hashes behind the writer. */
  hash: TailHash;
  progress: ProgressReporter;
  /** The request's abort signal and its explanation of a failure. */
  stall: StallGuard;
  where: PullWhere;
}

/** How often a file Bun is writing is looked at (progress, the hash's watermark, stall, oversize). */
const WATCH_MS = 25;

/**
 * Puts the body on disk after the first `start` bytes, telling the hash what has landed. A
 * fresh download goes through `Bun.write(file, response)`, which moves the bytes natively (no
 * JS per chunk: it reads and writes for what a JS loop spends on reading alone, see
 * docs/performance.md "Pull"); a resume appends with a read loop, because Bun.write only ever
 * writes from byte 0. The partial is kept on any failure but an oversized body.
 */
export async function writeBody(body: BodyWrite, start: number): Promise<void> {
  const written = start === 0 ? await pumpNative(body) : await pumpLoop(body, start);
  if (written > body.size) {
    rmSync(body.path, { force: true });
    throw pullError(
      body.where,
      "size_mismatch",
      `the server sent more than the ${body.size} bytes the hub lists; the partial file was deleted`,
    );
  }
  if (written < body.size)
    throw pullError(
      body.where,
      "connection_lost",
      `the server closed the connection after ${written} of ${body.size} bytes; the partial download is kept, pull again to resume`,
      { bytes_done: written, total: body.size },
    );
}

/**
 * Bun.write into the empty `.incomplete`, watched every WATCH_MS. For a body that arrived whole
 * Bun may size the file to the body's length before writing it, so a size that has reached the
 * total is not taken as written until Bun.write returns: the hash never reads ahead of the data.
 * Returns the file's length.
 */
async function pumpNative(body: BodyWrite): Promise<number> {
  const { stall, hash } = body;
  // Not opened "w": ext4 flushes a file on close when it was truncated to empty before being
  // written (auto_da_alloc), which cost 0.4 s per GiB at the end of every pull. The partial was
  // created empty; only a start-over (a server that ignored Range) has bytes to drop.
  const fd = openFor(body.path, "r+", body.where);
  if (fstatSync(fd).size > 0) ftruncateSync(fd, 0);
  let size = 0;
  let oversize = false;
  const look = () => {
    const now = fstatSync(fd).size;
    if (now > size) stall.touch();
    size = now;
    if (size < body.size) hash.advance(size);
    if (size > body.size && !oversize) {
      oversize = true;
      stall.abortNow();
    }
    return Math.min(size, body.size);
  };
  const watch = setInterval(look, WATCH_MS);
  body.progress.start("download", 0, look);
  try {
    await Bun.write(Bun.file(fd), body.response);
  } catch (err) {
    if (!oversize)
      throw stall.explain(err, body.where, look(), body.size) ?? writeFailure(err, body.where, body.path);
  } finally {
    clearInterval(watch);
    body.progress.unfollow(look());
    closeSync(fd);
  }
  return size;
}

/**
 * Appends the body after the partial: each chunk's positional write (on the thread pool)
 * overlaps the read of the next, so at most two chunks are held. Returns the bytes on disk.
 */
async function pumpLoop(body: BodyWrite, start: number): Promise<number> {
  const { stall, hash, where } = body;
  if (!body.response.body) throw pullError(where, "hub_error", "the server sent no body");
  const reader = body.response.body.getReader();
  const file = await openFile(body.path, where);
  let received = start;
  let written = start;
  let pending: Promise<void> = Promise.resolve();
  const put = (chunk: Uint8Array, at: number) =>
    writeAll(file, chunk, at).then(
      () => {
        written = at + chunk.byteLength;
        hash.advance(written);
      },
      (err: unknown) => Promise.reject(writeFailure(err, where, body.path)),
    );
  body.progress.start("download", start, () => written);
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      stall.touch();
      if (received + r.value.byteLength > body.size) {
        await reader.cancel();
        await pending.catch(() => {});
        return body.size + 1;
      }
      await pending;
      pending = put(r.value, received);
      received += r.value.byteLength;
    }
    await pending;
  } catch (err) {
    // What arrived is kept for the resume: let the last write land before reporting.
    await pending.catch(() => {});
    throw stall.explain(err, where, written, body.size) ?? err;
  } finally {
    body.progress.unfollow(written);
    await file.close();
  }
  return written;
}

/** A positional write of all of `chunk` (a regular file may take it in more than one piece). */
async function writeAll(file: FileHandle, chunk: Uint8Array, position: number): Promise<void> {
  let off = 0;
  while (off < chunk.byteLength) {
    const { bytesWritten } = await file.write(chunk, off, chunk.byteLength - off, position + off);
    if (bytesWritten <= 0) throw Object.assign(new Error("nothing was written"), { code: "EIO" });
    off += bytesWritten;
  }
}

/**
 * The partial opened to append the resume, never through a link: it was a regular file when the
 * pull looked, but one who can write the cache (a shared one) may swap a link in while the Range
 * request is on its way, and "r+" followed it to write the model's bytes into the file it named.
 */
async function openFile(path: string, where: PullWhere): Promise<FileHandle> {
  let file: FileHandle;
  try {
    file = await open(path, constants.O_RDWR | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    throw writeFailure(err, where, path);
  }
  const links = await file.stat().then(
    (s) => s.nlink,
    () => 1,
  );
  if (links > 1) {
    await file.close();
    throw linkedPartial(path, where);
  }
  return file;
}

/**
 * The partial opened for writing; never a blocking open (a FIFO swapped in is ENXIO or refused
 * by the caller's checks, not a wait for a reader), never through a link, and never a file with
 * another name: emptied ("w") only once that is known, not by the open's O_TRUNC.
 */
export function openFor(path: string, flags: "w" | "r+", where: PullWhere): number {
  const mode = flags === "w" ? constants.O_WRONLY | constants.O_CREAT : constants.O_RDWR;
  let fd: number;
  try {
    fd = openSync(path, mode | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    throw writeFailure(err, where, path);
  }
  const refused = refusal(fd, flags === "w", path, where);
  if (refused === null) return fd;
  closeSync(fd);
  throw refused;
}

/** Why the opened partial is not written (another name), else null once emptied where asked. */
function refusal(fd: number, empty: boolean, path: string, where: PullWhere): unknown {
  try {
    const stats = fstatSync(fd);
    if (stats.nlink > 1) return linkedPartial(path, where);
    if (empty && stats.size > 0) ftruncateSync(fd, 0);
    return null;
  } catch (err) {
    return writeFailure(err, where, path);
  }
}

/**
 * A partial with another name is a hard link to a file elsewhere (no pull makes one): one who
 * can write a shared cache links another's file in, and the download would append to it or,
 * starting over, empty it. O_NOFOLLOW does not see it; the link count does.
 */
function linkedPartial(path: string, where: PullWhere) {
  return pullError(
    where,
    "cache_unwritable",
    `${path} is a hard link to another file, never written; remove it and pull again`,
  );
}
