import { closeSync, lstatSync, renameSync, rmSync, type Stats, statSync } from "node:fs";
import { CoreError, cancelledError } from "../protocol/errors.ts";
import { kindOf } from "../util/read-file.ts";
import { openFor, writeBody } from "./body-writer.ts";
import type { HubClient } from "./hub-client.ts";
import type { ProgressReporter } from "./progress.ts";
import { fromHub, type PullWhere, pullError, writeFailure } from "./pull-errors.ts";
import { flushed, flushFile } from "./snapshot-link.ts";
import { StallGuard } from "./stall-guard.ts";
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
  /** The verified download's flush to the drive before its rename (an fsync); tests watch it. */
  flush?: ((path: string) => Promise<void>) | undefined;
}

export const DEFAULT_STALL_MS = 60_000;

/** Downloads (or resumes) `t` and moves it into place; returns the content's sha256. */
export async function downloadBlob(hub: HubClient, t: BlobTarget, hooks: DownloadHooks): Promise<string> {
  const where: PullWhere = { repo: t.repo, file: t.file };
  let offset = cachedFileSize(t.incomplete, where, false) ?? 0;
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
    // Checked: the last event is the finished download's, as a pull with nothing to check ends.
    hooks.progress.set("download", t.size);
    const got = t.expected.kind === "sha256" ? digests.sha256 : (digests.gitSha1 ?? "");
    if (got !== t.expected.value.toLowerCase()) {
      const kept = deleteRefused(t.incomplete);
      throw pullError(
        where,
        "checksum_mismatch",
        `the downloaded bytes do not match the hub's ${t.expected.kind} ${t.expected.value} (got ${got}); ${kept ? `the partial file ${t.incomplete} could not be deleted (${kept}): remove it and pull again` : "the partial file was deleted, pull again"}`,
        { expected: t.expected.value },
      );
    }
    // On the drive before its name says it is the model: renamed unflushed, a power cut left a
    // short file under its verified sha256, which every later pull took as in place.
    await flushed(hooks.flush ?? flushFile, t.incomplete).catch((err) => {
      throw writeFailure(err, where, t.incomplete);
    });
    moveIntoPlace(t, where);
    // A cancel during the flush (seconds to minutes to a slow drive) ends the pull here: the
    // verified blob stays for the next pull, the snapshot entry is not made.
    if (hooks.signal.aborted)
      throw new CoreError(
        "cancelled",
        `the pull of ${t.repo} ${t.file} was cancelled; the download is kept`,
        {
          bytes_done: t.size,
          total: t.size,
        },
      );
    return digests.sha256;
  } catch (err) {
    hash.stop();
    await hash.ended();
    dropIfEmpty(t.incomplete);
    throw err;
  } finally {
    // Returned only once no hash worker holds the partial (a retry, a delete see it closed).
    hash.stop();
    await hash.ended();
  }
}

/**
 * Deletes a partial that failed its check; the refusal's code when it cannot be (on Windows an
 * antivirus scanning it: EPERM, EBUSY), else null. Its raw error was an internal_error that
 * said neither the mismatch nor the file.
 */
function deleteRefused(partial: string): string | null {
  try {
    rmSync(partial, { force: true });
    return null;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? (err as Error).message;
  }
}

/**
 * The verified partial renamed to its blob's name. A refusal (on Windows an antivirus scanning
 * the fresh file: EPERM, EBUSY) names both files: the raw error was an internal_error.
 */
function moveIntoPlace(t: BlobTarget, where: PullWhere): void {
  try {
    renameSync(t.incomplete, t.blob);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw pullError(
      where,
      "cache_unwritable",
      `cannot move the verified download into place as ${t.blob} (${code}); it is kept as ${t.incomplete}, pull again`,
    );
  }
}

/**
 * A failure before any byte arrived (a 500, a 404, a redirect loop, a lying X-Linked-Size)
 * leaves nothing behind: an empty partial is no resume, only litter. One with bytes is kept.
 */
function dropIfEmpty(partial: string): void {
  try {
    const stats = lstatSync(partial);
    if (stats.isFile() && stats.size === 0) rmSync(partial, { force: true });
  } catch {
    // Gone already, or not ours to remove.
  }
}

/**
 * The size of the regular file at `path` in the cache, null when nothing is there. Anything
 * else there (a FIFO, a folder; a link too unless `follow`) is refused, never opened: a FIFO
 * would block the open, and the core with it.
 */
export function cachedFileSize(path: string, where: PullWhere, follow: boolean): number | null {
  let stats: Stats;
  try {
    stats = follow ? statSync(path) : lstatSync(path);
  } catch {
    return null;
  }
  if (stats.isFile()) return stats.size;
  throw pullError(
    where,
    "cache_unwritable",
    `${path} is not a regular file (${kindOf(stats)}); remove it and pull again`,
  );
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
  // What is left to hash (a resumed partial read back, or all of one already whole) is shown
  // as the check phase: seconds to minutes for gigabytes, which must not look like a hang.
  hooks.progress.start("check", hash.position(), () => hash.position());
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
    hooks.progress.unfollow(hash.position());
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
      await hash.ended();
      hash = newHash(t, hooks, 0);
    }
    try {
      await writeBody(
        { response, path: t.incomplete, size: t.size, hash, progress: hooks.progress, stall, where },
        start,
      );
    } catch (err) {
      // The caller stops only the hash it handed in: a fresh one made for a restart is ours.
      hash.stop();
      await hash.ended();
      throw err;
    }
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
  // Asked for identity: fetch would inflate an encoded body on its own, unbounded, with
  // Content-Length still the encoded size (a correct file read as the wrong size).
  const encoding = response.headers.get("content-encoding")?.trim().toLowerCase();
  if (encoding && isCoded(encoding))
    throw pullError(
      where,
      "hub_error",
      `the server sent the file encoded (Content-Encoding: ${encoding.slice(0, 40)}) though asked for identity`,
    );
  // A sign-in portal or a filtering proxy answers any URL with its page, often without a length
  // to compare: written, it became the partial the next pull resumed behind (or, answering a
  // resume, replaced the partial). No hub or mirror serves a GGUF as a web page.
  const type = (response.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "text/html" || type === "application/xhtml+xml")
    throw pullError(
      where,
      "hub_error",
      `the server answered a web page (Content-Type: ${type}), not the file (a sign-in page or a proxy in the way?)${offset > 0 ? "; the partial download is kept" : ""}`,
      { http_status: response.status },
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

/**
 * The content codings registered for HTTP (IANA) but identity: bytes transformed, which fetch
 * inflates (gzip, deflate, br, zstd) or hands on packed. Any other label (`none`, `binary`,
 * `utf-8`: a mirror's misconfigured header) is no coding: fetch leaves the bytes as sent and the
 * size and sha256 checks stand, as for huggingface_hub, which pulls from such a mirror.
 */
const CODINGS = new Set([
  "aes128gcm",
  "br",
  "compress",
  "dcb",
  "dcz",
  "deflate",
  "exi",
  "gzip",
  "pack200-gzip",
  "x-compress",
  "x-gzip",
  "zstd",
]);

/** Whether a Content-Encoding (a list, in any case, with parameters) names a coding. */
function isCoded(encoding: string): boolean {
  return encoding.split(",").some((c) => CODINGS.has(c.split(";")[0]!.trim()));
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
