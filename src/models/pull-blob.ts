import { createHash } from "node:crypto";
import { createReadStream, statSync } from "node:fs";
import { cancelledError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { openRegularFile } from "../util/read-file.ts";
import { seconds } from "../util/seconds.ts";
import { type BlobTarget, cachedFileSize, downloadBlob } from "./download.ts";
import { giveUp, LOCK_QUIET_MS, LockWatch, tryLock } from "./download-lock.ts";
import type { HubClient } from "./hub-client.ts";
import type { ProgressReporter } from "./progress.ts";
import { writeFailure } from "./pull-errors.ts";

/**
 * One blob of a pull (pull.ts) into the shared Hugging Face cache: already in place, or
 * downloaded by one writer at a time under the blob's lock, a second pull of it waiting (and
 * taking over a lock that shows no sign of life).
 */

/** The edges a blob's download reads through (part of pull.ts `PullDeps`); tests replace them. */
export interface BlobDeps {
  /** Tests: the verified download's flush to the drive before its rename (download.ts). */
  flushBlob?: (path: string) => Promise<void>;
  stallMs?: number;
  /** How often a pull waiting on another writer looks again. */
  pollMs?: number;
  /** Hash after the download on this thread (where worker threads are unavailable; tests). */
  inlineHash?: boolean;
  /**
   * When process `pid` started (runtime/proc-info's `start_time`), so a lock whose pid now
   * names another process is known stale; without it only a dead pid or silence tells.
   */
  processStart?: (pid: number) => string | null;
  /** When process `pid` started by the wall clock (runtime/proc-info's `processStartedAt`). */
  processStartedAt?: (pid: number) => number | null;
  /** How long another writer's lock may show no sign of life before this pull takes it over (default LOCK_QUIET_MS). */
  lockQuietMs?: number;
}

const DEFAULT_POLL_MS = 500;

/**
 * The bytes a `.incomplete` holds; 0 when there is none. In one look: another pull may rename it
 * into place between an exists and a stat, which then threw ENOENT as an unexpected error.
 */
export function partialSize(path: string): number {
  return statSync(path, { throwIfNoEntry: false })?.size ?? 0;
}

/**
 * The blob in place and its sha256: already there, downloaded by another pull we waited for,
 * or downloaded here under the blob's lock.
 */
export async function obtainBlob(
  hub: HubClient,
  t: BlobTarget,
  reporter: ProgressReporter,
  deps: BlobDeps,
  hooks: { signal: AbortSignal; note(message: string): void },
): Promise<string> {
  const lockPath = `${t.blob}.lock`;
  let watch: LockWatch | undefined;
  for (;;) {
    if (blobInPlace(t)) return knownSha256(t, hooks.signal);
    let lock: ReturnType<typeof tryLock>;
    try {
      lock = tryLock(lockPath, { processStart: deps.processStart, processStartedAt: deps.processStartedAt });
    } catch (err) {
      throw writeFailure(err, { repo: t.repo, file: t.file }, lockPath);
    }
    if ("busy" in lock) {
      const partial = partialSize(t.incomplete);
      if (!watch) reporter.start("wait", partial);
      else reporter.set("wait", partial);
      watch ??= new LockWatch(lockPath, t.incomplete, deps.lockQuietMs ?? LOCK_QUIET_MS);
      if (watch.quiet()) {
        const pid = lock.busy ? ` (pid ${lock.busy.pid})` : "";
        hooks.note(
          `${t.file}: the pull holding ${lockPath}${pid} showed no progress for ${seconds(watch.quietMs)}; taking it over`,
        );
        giveUp(lockPath, lock.busy);
        watch = undefined;
        continue;
      }
      await sleep(deps.pollMs ?? DEFAULT_POLL_MS, hooks.signal, t);
      continue;
    }
    try {
      if (blobInPlace(t)) return knownSha256(t, hooks.signal);
      return await downloadBlob(hub, t, {
        signal: hooks.signal,
        progress: reporter,
        note: hooks.note,
        stallMs: deps.stallMs,
        inlineHash: deps.inlineHash,
        flush: deps.flushBlob,
      });
    } finally {
      lock.release();
    }
  }
}

/** The blob is in place: a regular file under its name (anything else there is refused, never read). */
export function blobInPlace(t: BlobTarget): boolean {
  // Of the listed size: a short one (renamed before its bytes reached the drive, by a core before
  // the flush, then a power cut) is downloaded again, not linked as the model for good.
  return cachedFileSize(t.blob, { repo: t.repo, file: t.file }, true) === t.size;
}

/** A blob already in place: its sha256 is its name for LFS files; a git-kept file is hashed. */
async function knownSha256(t: BlobTarget, signal: AbortSignal): Promise<string> {
  if (t.expected.kind === "sha256") return t.expected.value;
  const hash = createHash("sha256");
  const { fd } = openRegularFile(t.blob);
  for await (const chunk of createReadStream(t.blob, { fd })) {
    if (signal.aborted) throw cancelledError();
    hash.update(chunk as Buffer);
  }
  return hash.digest("hex");
}

/** A poll's pause; a cancel ends it at once (the poll's short timer runs out on its own). */
async function sleep(ms: number, signal: AbortSignal, t: BlobTarget): Promise<void> {
  try {
    await abortable(Bun.sleep(ms), signal);
  } catch {
    throw cancelledError(
      `the pull of ${t.repo} ${t.file} was cancelled while another pull was downloading it`,
    );
  }
}
