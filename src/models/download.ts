import { closeSync, existsSync, fstatSync, openSync, renameSync, rmSync, statSync } from "node:fs";
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
 * The body goes to the file through `Bun.write(file, response)`: Bun moves the bytes natively,
 * with the socket's own backpressure and a few MB of memory, at the speed of curl; a JS loop
 * over the chunks cost a third more CPU per byte (docs/performance.md, "pull"). Progress, a
 * stall and an oversized body are seen by watching the file grow.
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

/** How often the growing file is looked at (progress, stall, oversize). */
const WATCH_MS = 100;

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
  let hash = newHash(t, hooks);
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
function newHash(t: BlobTarget, hooks: DownloadHooks): TailHash {
  return startTailHash(t.incomplete, {
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
      opened = await hub.open(t.repo, t.commit, t.file, offset, stall.signal);
    } catch (err) {
      throw stall.explain(err, where, offset, t.size) ?? fromHub(err, where);
    }
    const { response } = opened;
    let start: number;
    try {
      start = checkAnswer(response, opened.linked, t, offset, where);
    } catch (err) {
      await response.body?.cancel();
      throw err;
    }
    if (start !== offset) {
      hooks.note(
        `${t.file}: the server ignored the Range request (HTTP ${response.status}); starting over from byte 0`,
      );
      hash.stop();
      closeSync(openFor(t.incomplete, "w", where));
      hash = newHash(t, hooks);
    }
    await writeBody(response, start, t, hooks, stall, where);
    return { hash };
  } finally {
    stall.stop();
  }
}

/**
 * Checks the hub's answer against the listing; returns where the body starts: `offset` for a
 * 206 that continues the partial, 0 for a 200 (the whole file again).
 */
function checkAnswer(
  response: Response,
  linked: { size: number | null; etag: string | null },
  t: BlobTarget,
  offset: number,
  where: PullWhere,
): number {
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

/** Streams the body onto the end of the partial, watching it grow; the partial is kept on any failure but an oversize. */
async function writeBody(
  response: Response,
  start: number,
  t: BlobTarget,
  hooks: DownloadHooks,
  stall: StallGuard,
  where: PullWhere,
): Promise<void> {
  const fd = openFor(t.incomplete, "a", where);
  let size = start;
  let oversize = false;
  const look = () => {
    const now = fstatSync(fd).size;
    if (now > size) stall.touch();
    size = now;
    if (size > t.size && !oversize) {
      oversize = true;
      stall.abortNow();
    }
    return Math.min(size, t.size);
  };
  const watch = setInterval(look, WATCH_MS);
  hooks.progress.start("download", start, look);
  try {
    await Bun.write(Bun.file(fd), response);
  } catch (err) {
    if (!oversize) throw stall.explain(err, where, look(), t.size) ?? writeFailure(err, where, t.incomplete);
  } finally {
    clearInterval(watch);
    hooks.progress.unfollow(look());
    closeSync(fd);
  }
  if (oversize || size > t.size) {
    rmSync(t.incomplete, { force: true });
    throw pullError(
      where,
      "size_mismatch",
      `the server sent more than the ${t.size} bytes the hub lists; the partial file was deleted`,
    );
  }
  if (size < t.size)
    throw pullError(
      where,
      "connection_lost",
      `the server closed the connection after ${size} of ${t.size} bytes; the partial download is kept, pull again to resume`,
      { bytes_done: size, total: t.size },
    );
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

  touch(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.stalled = true;
      this.ac.abort();
    }, this.ms);
  }

  abortNow(): void {
    this.ac.abort();
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
        `no data for ${Math.round(this.ms / 1000)} s after ${done} of ${total} bytes${keep}`,
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

function openFor(path: string, flags: "w" | "a", where: PullWhere): number {
  try {
    return openSync(path, flags);
  } catch (err) {
    throw writeFailure(err, where, path);
  }
}
