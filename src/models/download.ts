import {
  closeSync,
  existsSync,
  fstatSync,
  ftruncateSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { type FileHandle, open } from "node:fs/promises";
import { cancelledError, isCoreError } from "../protocol/errors.ts";
import { type HubClient, HubError, HubUnreachable } from "./hub-client.ts";
import type { ProgressReporter } from "./progress.ts";
import { fromHub, type PullWhere, pullError } from "./pull-errors.ts";
import { type Digests, startTailHash, type TailHash } from "./tail-hash.ts";

/**
 * One blob from the hub into the cache: appended to `<blob>.incomplete` (kept when the
 * download breaks, so the next pull resumes it with a Range request), hashed as it lands,
 * checked against the hub's hash, and only then renamed to its final name.
 *
 * Memory stays bounded: the body is never held whole (a few MB in flight, see writeBody).
 */

export interface BlobTarget {
  repo: string;
  file: string;
  commit: string;
  size: number;
  /** The LFS oid (the content's sha256), or for a file kept in git itself its git blob sha1. */
  expected: { kind: "sha256" | "git-sha1"; value: string };
  blob: string;
  incomplete: string;
}

export interface DownloadHooks {
  signal: AbortSignal;
  progress: ProgressReporter;
  /** Something the user should know that is not a failure (a restart from zero). */
  note(message: string): void;
  /** No byte for this long ends the attempt as a lost connection (the partial is kept). */
  stallMs?: number | undefined;
  /** Hash on this thread after the download instead of in a worker beside it. */
  inlineHash?: boolean | undefined;
}

export const DEFAULT_STALL_MS = 60_000;

/** Downloads (or resumes) `t` and moves it into place; returns the content's sha256. */
export async function downloadBlob(hub: HubClient, t: BlobTarget, hooks: DownloadHooks): Promise<string> {
  const where: PullWhere = { repo: t.repo, file: t.file };
  let offset = existsSync(t.incomplete) ? statSync(t.incomplete).size : 0;
  if (offset > t.size) {
    hooks.note(`${t.file}: the partial download is larger than the file; starting over`);
    offset = 0;
  }
  if (offset === 0) closeSync(openFor(t.incomplete, "w", where));
  // The hash starts at once: it reads the partial while the request is on its way.
  let hash = newHash(t, hooks, offset);
  try {
    if (offset < t.size) {
      const fetched = await fetchRest(hub, t, offset, hash, hooks, where);
      hash = fetched.hash;
    }
    const digests = await finishHash(hash, t, hooks, where);
    const got = t.expected.kind === "sha256" ? digests.sha256 : (digests.gitSha1 ?? "");
    if (got !== t.expected.value.toLowerCase()) {
      rmSync(t.incomplete, { force: true });
      throw pullError(
        where,
        "checksum_mismatch",
        `the downloaded bytes do not match the hub's ${t.expected.kind} ${t.expected.value} (got ${got}); the partial file was deleted, pull again`,
        { expected: t.expected.value },
      );
    }
    renameSync(t.incomplete, t.blob);
    return digests.sha256;
  } finally {
    hash.stop();
  }
}

/** sha256 always (the result reports it); git's blob id too for a file kept in git. */
function newHash(t: BlobTarget, hooks: DownloadHooks, written: number): TailHash {
  return startTailHash(t.incomplete, {
    written,
    gitBlobSize: t.expected.kind === "git-sha1" ? t.size : undefined,
    inline: hooks.inlineHash,
  });
}

async function finishHash(
  hash: TailHash,
  t: BlobTarget,
  hooks: DownloadHooks,
  where: PullWhere,
): Promise<Digests> {
  const stop = () => hash.stop();
  hooks.signal.addEventListener("abort", stop, { once: true });
  try {
    return await hash.finish(t.size);
  } catch (err) {
    if (hooks.signal.aborted) throw cancelledError(`the pull of ${t.repo} ${t.file} was cancelled`);
    throw pullError(
      where,
      "cache_unwritable",
      `cannot read back ${t.incomplete} to verify it (${(err as Error).message})`,
    );
  } finally {
    hooks.signal.removeEventListener("abort", stop);
  }
}

/**
 * Requests the bytes from `offset` on and appends them to the partial; returns the hash (a
 * fresh one when the download had to start over). A server that answers the whole file (200)
 * to a Range request makes the download start over, said in a note.
 */
async function fetchRest(
  hub: HubClient,
  t: BlobTarget,
  offset: number,
  hash: TailHash,
  hooks: DownloadHooks,
  where: PullWhere,
): Promise<{ hash: TailHash }> {
  const stall = new StallGuard(hooks.signal, hooks.stallMs ?? DEFAULT_STALL_MS);
  try {
    let opened: Awaited<ReturnType<HubClient["open"]>>;
    try {
      opened = await hub.open(t.repo, t.commit, t.file, offset, stall.signal, (linked) =>
        checkAnnounced(linked, t, where),
      );
    } catch (err) {
      throw stall.explain(err, where, offset, t.size) ?? fromHub(err, where);
    }
    const { response } = opened;
    let start: number;
    try {
      start = checkAnswer(response, t, offset, where);
    } catch (err) {
      await response.body?.cancel();
      throw err;
    }
    if (start !== offset) {
      hooks.note(
        `${t.file}: the server ignored the Range request (HTTP ${response.status}); starting over from byte 0`,
      );
      hash.stop();
      hash = newHash(t, hooks, 0);
    }
    await writeBody(response, start, t, hash, hooks, stall, where);
    return { hash };
  } finally {
    stall.stop();
  }
}

/**
 * Checks the hub's answer against the listing; returns where the body starts: `offset` for a
 * 206 that continues the partial, 0 for a 200 (the whole file again).
 */
function checkAnswer(response: Response, t: BlobTarget, offset: number, where: PullWhere): number {
  let start = offset;
  if (offset > 0 && response.status !== 206) start = 0;
  else if (offset > 0) {
    const from = /^bytes (\d+)-/.exec(response.headers.get("content-range") ?? "");
    if (!from || Number(from[1]) !== offset)
      throw pullError(
        where,
        "hub_error",
        `asked for bytes from ${offset}, the server sent ${response.headers.get("content-range") ?? "no Content-Range"}`,
      );
  }
  const length = Number(response.headers.get("content-length") ?? Number.NaN);
  if (Number.isFinite(length) && start + length !== t.size)
    throw pullError(
      where,
      "size_mismatch",
      `the server announces ${start + length} bytes, the hub lists ${t.size}`,
    );
  return start;
}

/** The size and sha256 the hub's resolve headers announce must be the listing's (checked before the redirect). */
function checkAnnounced(
  linked: { size: number | null; etag: string | null },
  t: BlobTarget,
  where: PullWhere,
): void {
  if (linked.size !== null && linked.size !== t.size)
    throw pullError(
      where,
      "size_mismatch",
      `the hub announces ${linked.size} bytes (X-Linked-Size), its listing ${t.size}`,
    );
  const etag = linked.etag;
  if (
    t.expected.kind === "sha256" &&
    etag !== null &&
    /^[0-9a-f]{64}$/.test(etag) &&
    etag !== t.expected.value
  )
    throw pullError(
      where,
      "checksum_mismatch",
      `the hub announces sha256 ${etag} (X-Linked-Etag), its listing ${t.expected.value}`,
    );
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
async function writeBody(
  response: Response,
  start: number,
  t: BlobTarget,
  hash: TailHash,
  hooks: DownloadHooks,
  stall: StallGuard,
  where: PullWhere,
): Promise<void> {
  const written =
    start === 0
      ? await pumpNative(response, t, hash, hooks, stall, where)
      : await pumpLoop(response, start, t, hash, hooks, stall, where);
  if (written > t.size) {
    rmSync(t.incomplete, { force: true });
    throw pullError(
      where,
      "size_mismatch",
      `the server sent more than the ${t.size} bytes the hub lists; the partial file was deleted`,
    );
  }
  if (written < t.size)
    throw pullError(
      where,
      "connection_lost",
      `the server closed the connection after ${written} of ${t.size} bytes; the partial download is kept, pull again to resume`,
      { bytes_done: written, total: t.size },
    );
}

/**
 * Bun.write into the empty `.incomplete`, watched every WATCH_MS. For a body that arrived whole
 * Bun may size the file to the body's length before writing it, so a size that has reached the
 * total is not taken as written until Bun.write returns: the hash never reads ahead of the data.
 * Returns the file's length.
 */
async function pumpNative(
  response: Response,
  t: BlobTarget,
  hash: TailHash,
  hooks: DownloadHooks,
  stall: StallGuard,
  where: PullWhere,
): Promise<number> {
  // Not "w": ext4 flushes a file on close when it was truncated to empty before being written
  // (auto_da_alloc), which cost 0.4 s per GiB at the end of every pull. The partial was created
  // empty; only a start-over (a server that ignored Range) has bytes to drop.
  const fd = openFor(t.incomplete, "r+", where);
  if (fstatSync(fd).size > 0) ftruncateSync(fd, 0);
  let size = 0;
  let oversize = false;
  const look = () => {
    const now = fstatSync(fd).size;
    if (now > size) stall.touch();
    size = now;
    if (size < t.size) hash.advance(size);
    if (size > t.size && !oversize) {
      oversize = true;
      stall.abortNow();
    }
    return Math.min(size, t.size);
  };
  const watch = setInterval(look, WATCH_MS);
  hooks.progress.start("download", 0, look);
  try {
    await Bun.write(Bun.file(fd), response);
  } catch (err) {
    if (!oversize) throw stall.explain(err, where, look(), t.size) ?? writeFailure(err, where, t.incomplete);
  } finally {
    clearInterval(watch);
    hooks.progress.unfollow(look());
    closeSync(fd);
  }
  return size;
}

/**
 * Appends the body after the partial: each chunk's positional write (on the thread pool)
 * overlaps the read of the next, so at most two chunks are held. Returns the bytes on disk.
 */
async function pumpLoop(
  response: Response,
  start: number,
  t: BlobTarget,
  hash: TailHash,
  hooks: DownloadHooks,
  stall: StallGuard,
  where: PullWhere,
): Promise<number> {
  if (!response.body) throw pullError(where, "hub_error", "the server sent no body");
  const reader = response.body.getReader();
  const file = await openFile(t.incomplete, "r+", where);
  let received = start;
  let written = start;
  let pending: Promise<void> = Promise.resolve();
  const put = (chunk: Uint8Array, at: number) =>
    writeAll(file, chunk, at).then(
      () => {
        written = at + chunk.byteLength;
        hash.advance(written);
      },
      (err: unknown) => Promise.reject(writeFailure(err, where, t.incomplete)),
    );
  hooks.progress.start("download", start, () => written);
  try {
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      stall.touch();
      if (received + r.value.byteLength > t.size) {
        await reader.cancel();
        await pending.catch(() => {});
        return t.size + 1;
      }
      await pending;
      pending = put(r.value, received);
      received += r.value.byteLength;
    }
    await pending;
  } catch (err) {
    // What arrived is kept for the resume: let the last write land before reporting.
    await pending.catch(() => {});
    throw stall.explain(err, where, written, t.size) ?? err;
  } finally {
    hooks.progress.unfollow(written);
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
 * The request's own abort signal: the caller's cancel, no byte for `ms`, or an oversized body.
 * Explains a failure as cancelled, stalled, or a cut connection (the partial is kept in each).
 */
class StallGuard {
  private readonly ac = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stalled = false;
  private readonly onAbort = () => this.ac.abort();

  constructor(
    private readonly outer: AbortSignal,
    private readonly ms: number,
  ) {
    if (outer.aborted) this.ac.abort();
    else outer.addEventListener("abort", this.onAbort, { once: true });
    this.touch();
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** Ends the request now (an oversized body); not a stall, not a cancel. */
  abortNow(): void {
    this.ac.abort();
  }

  touch(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.stalled = true;
      this.ac.abort();
    }, this.ms);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.outer.removeEventListener("abort", this.onAbort);
  }

  explain(err: unknown, where: PullWhere, done: number, total: number): unknown {
    if (this.outer.aborted)
      return cancelledError(
        `the pull of ${where.repo} ${where.file} was cancelled; the partial download is kept`,
      );
    if (isCoreError(err)) return err;
    const keep = "; the partial download is kept, pull again to resume";
    if (this.stalled)
      return pullError(
        where,
        "connection_lost",
        `no data for ${this.ms >= 1000 ? `${Math.round(this.ms / 1000)} s` : `${this.ms} ms`} after ${done} of ${total} bytes${keep}`,
        { bytes_done: done, total },
      );
    if (err instanceof HubError || err instanceof HubUnreachable) return undefined;
    const code = (err as NodeJS.ErrnoException)?.code;
    if (code === "ENOSPC" || code === "EDQUOT" || code === "EACCES" || code === "EROFS" || code === "EIO")
      return undefined;
    return pullError(
      where,
      "connection_lost",
      `the connection broke after ${done} of ${total} bytes (${connectionCause(err)})${keep}`,
      { bytes_done: done, total },
    );
  }
}

function connectionCause(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e?.code === "string" && e.code) return e.code;
  return String(e?.message ?? err)
    .split("\n")[0]!
    .slice(0, 120);
}

/** A failed write: the disk filled up (the partial is kept for when there is room), or the cache cannot be written. */
export function writeFailure(err: unknown, where: PullWhere, path: string): unknown {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === "ENOSPC" || code === "EDQUOT")
    return pullError(
      where,
      "disk_full",
      `the disk filled up while writing ${path} (${code}); the partial download is kept, free some space and pull again`,
    );
  if (typeof code === "string") return pullError(where, "cache_unwritable", `cannot write ${path} (${code})`);
  return err;
}

async function openFile(path: string, flags: "w" | "r+", where: PullWhere): Promise<FileHandle> {
  try {
    return await open(path, flags);
  } catch (err) {
    throw writeFailure(err, where, path);
  }
}

function openFor(path: string, flags: "w" | "r+", where: PullWhere): number {
  try {
    return openSync(path, flags);
  } catch (err) {
    throw writeFailure(err, where, path);
  }
}
