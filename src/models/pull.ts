import { mkdirSync } from "node:fs";
import { dirname, relative } from "node:path";
import { cancelledError, isCoreError } from "../protocol/errors.ts";
import type { DownloadProgress } from "../protocol/pull.ts";
import { type FreeSpaceProbe, SPACE_MARGIN_BYTES, spaceShortfall, statfsFree } from "./disk-space.ts";
import type { BlobTarget } from "./download.ts";
import {
  blobPath,
  type Env,
  endpointProblem,
  hubCacheDir,
  hubEndpoint,
  incompletePath,
  isOffline,
  refPath,
  repoPaths,
  snapshotPath,
} from "./hf-cache.ts";
import { HubClient, type HubFile } from "./hub-client.ts";
import { readToken, UnusableToken } from "./hub-token.ts";
import { unstorableName, unstorablePath } from "./listed-entry.ts";
import { pickFiles, pickProjector } from "./pick-file.ts";
import { isProjector } from "./pick-gguf.ts";
import { ProgressReporter } from "./progress.ts";
import { type BlobDeps, blobInPlace, obtainBlob, partialSize } from "./pull-blob.ts";
import { fromHub, type PullWhere, pullError, writeFailure } from "./pull-errors.ts";
import { linkSnapshot, type MakeSymlink, writeRef } from "./snapshot-link.ts";

/**
 * `pull`: a model from the hub into the shared Hugging Face cache. The revision is pinned to
 * its commit first, so every part comes from the same commit even if the branch moves; each
 * blob is downloaded by one writer at a time (a second pull of the same file waits for it,
 * showing the first one's progress), verified, linked from the snapshot, and the revision's
 * ref is written last.
 */

export interface PullRequest {
  repo: string;
  quant?: string | undefined;
  file?: string | undefined;
  revision: string;
}

/** The edges a pull reads through; tests replace them (a blob's own: pull-blob.ts). */
export interface PullDeps extends BlobDeps {
  env: Env;
  home: string;
  fetch?: typeof fetch;
  freeSpace?: FreeSpaceProbe;
  symlink?: MakeSymlink;
  hardlink?: MakeSymlink;
  /** Tests: the snapshot copy's flush to the drive (snapshot-link.ts). */
  flushCopy?: (path: string) => Promise<void>;
  /** Tests: the system whose file names a stored file must be (process.platform). */
  platform?: NodeJS.Platform;
  /** The time limit of the hub's API calls (default 30 s). */
  apiTimeoutMs?: number;
}

export interface PullHooks {
  signal: AbortSignal;
  progress(p: DownloadProgress): void;
  /** A notice that is not a failure (also returned in `warnings`). */
  note?(message: string): void;
}

export interface PulledFile {
  file: string;
  /** The snapshot path (a link to the blob). */
  path: string;
  size_bytes: number;
  sha256: string;
}

export interface PullOutcome {
  repo: string;
  revision: string;
  commit: string;
  /** What `model.path` should name: the only file, or the first part of a split model. */
  path: string;
  size_bytes: number;
  /** The sha256 of the file `path` names (each part's is in `files`). */
  sha256: string;
  /** The vision projector fetched with the model (its snapshot path, also in `files`); null: the repo has none. */
  mmproj: string | null;
  files: PulledFile[];
  cache_dir: string;
  warnings: string[];
}

export async function pullModel(req: PullRequest, deps: PullDeps, hooks: PullHooks): Promise<PullOutcome> {
  const where: PullWhere = { repo: req.repo, file: req.file, revision: req.revision };
  if (isOffline(deps.env))
    throw pullError(
      where,
      "offline",
      "HF_HUB_OFFLINE is set, so pull does not touch the network (unset it to download)",
    );
  const badEndpoint = endpointProblem(hubEndpoint(deps.env));
  if (badEndpoint) throw pullError(where, "bad_endpoint", badEndpoint);
  checkRefName(req.revision, deps, where);
  const cacheDir = hubCacheDir(deps.env, deps.home);
  const hub = new HubClient({
    endpoint: hubEndpoint(deps.env),
    token: tokenFor(deps, where),
    fetch: deps.fetch,
    apiTimeoutMs: deps.apiTimeoutMs,
  });
  const commit = await hubCall(() => hub.commitOf(req.repo, req.revision, hooks.signal), where, hooks.signal);
  const listing = await hubCall(() => hub.listFiles(req.repo, commit, hooks.signal), where, hooks.signal);
  const model = pickFiles(req, listing);
  // A vision model's projector (its folder's) comes with it, so `mmproj: auto` finds it too.
  const projector = isProjector(model[0]!.path) ? null : pickProjector(listing, model[0]!.path);
  const parts = projector ? [...model, projector] : model;
  const targets = parts.map((f) => blobTarget(cacheDir, req.repo, commit, f));
  for (const t of targets) checkStorable(t, snapshotPath(cacheDir, req.repo, commit, t.file), deps, where);
  prepareCache(cacheDir, req.repo, where);
  checkSpace(targets, cacheDir, deps.freeSpace ?? statfsFree, where);

  const warnings: string[] = [];
  const note = (message: string) => {
    warnings.push(message);
    hooks.note?.(message);
  };
  const files: PulledFile[] = [];
  for (const [i, t] of targets.entries()) {
    const reporter = new ProgressReporter({
      file: t.file,
      part: i + 1,
      parts: targets.length,
      total: t.size,
      emit: hooks.progress,
    });
    try {
      const sha256 = await obtainBlob(hub, t, reporter, deps, { ...hooks, note });
      const pointer = snapshotPath(cacheDir, req.repo, commit, t.file);
      // A copy (no links here) runs for minutes: the host sees the beat, not a frozen bar.
      reporter.hold(t.size);
      if (
        (await cacheWrite(
          () => linkSnapshot(t.blob, pointer, { ...deps, signal: hooks.signal }),
          t,
          pointer,
        )) === "copy"
      )
        note(`${t.file}: this folder does not allow links, so the snapshot holds a copy of the blob`);
      reporter.update(t.size);
      reporter.finish();
      files.push({ file: t.file, path: pointer, size_bytes: t.size, sha256 });
    } finally {
      reporter.stop();
    }
  }
  if (req.revision !== commit) {
    const ref = refPath(cacheDir, req.repo, req.revision);
    await cacheWrite(() => writeRef(ref, commit), { repo: req.repo, file: undefined }, ref);
  }
  return {
    repo: req.repo,
    revision: req.revision,
    commit,
    path: files[0]!.path,
    size_bytes: files.slice(0, model.length).reduce((a, f) => a + f.size_bytes, 0),
    sha256: files[0]!.sha256,
    mmproj: projector ? files.at(-1)!.path : null,
    files,
    cache_dir: cacheDir,
    warnings,
  };
}

/** A file this system cannot name, by itself or with the snapshot's path before it: refused before its download. */
function checkStorable(t: BlobTarget, pointer: string, deps: PullDeps, where: PullWhere): void {
  const path = t.file;
  // The link as linkSnapshot makes it: relative, from the entry's folder to the blob.
  const link = relative(dirname(pointer), t.blob);
  const why = unstorableName(path, deps.platform) ?? unstorablePath(pointer, deps.platform, link);
  if (why)
    throw pullError(
      { ...where, file: path },
      "bad_listing",
      `the hub's file listing names ${JSON.stringify(path)}, which ${why} on this system; nothing was downloaded`,
      { entry: path },
    );
}

/**
 * A branch or tag is stored as refs/<revision>: one this system cannot name (`aux`, `nul` on
 * Windows are devices) is refused before any request, not by the ref's write after the download.
 * A commit writes no ref.
 */
function checkRefName(revision: string, deps: PullDeps, where: PullWhere): void {
  const why = /^[0-9a-f]{40}$/.test(revision) ? null : unstorableName(revision, deps.platform);
  if (why)
    throw pullError(
      where,
      "cache_unwritable",
      `the revision ${JSON.stringify(revision)}, stored as a file under refs/, ${why} on this system: pull it by its commit instead; nothing was downloaded`,
    );
}

/** The hub token; one that cannot be sent fails the pull before any request, saying why but never showing it. */
function tokenFor(deps: PullDeps, where: PullWhere): string | undefined {
  try {
    return readToken(deps.env, deps.home);
  } catch (err) {
    if (!(err instanceof UnusableToken)) throw err;
    throw pullError(where, "unauthorized", `the hub token cannot be used: ${err.message}`);
  }
}

/** A write into the cache after the download (link, ref): an OS error names the path. */
async function cacheWrite<T>(
  write: () => T | Promise<T>,
  where: { repo: string; file: string | undefined },
  path: string,
): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isCoreError(err)) throw err;
    throw writeFailure(err, { repo: where.repo, file: where.file }, path);
  }
}

async function hubCall<T>(call: () => Promise<T>, where: PullWhere, signal: AbortSignal): Promise<T> {
  try {
    return await call();
  } catch (err) {
    if (signal.aborted) throw cancelledError(`the pull of ${where.repo} was cancelled`);
    throw fromHub(err, where);
  }
}

function blobTarget(cacheDir: string, repo: string, commit: string, f: HubFile): BlobTarget {
  // LFS files are named by their sha256, files kept in git by their git blob id, as the cache does.
  const expected = f.lfs
    ? { kind: "sha256" as const, value: f.lfs.oid }
    : { kind: "git-sha1" as const, value: f.oid };
  return {
    repo,
    file: f.path,
    commit,
    size: f.size,
    expected,
    blob: blobPath(cacheDir, repo, expected.value),
    incomplete: incompletePath(cacheDir, repo, expected.value),
  };
}

function prepareCache(cacheDir: string, repo: string, where: PullWhere): void {
  const paths = repoPaths(cacheDir, repo);
  for (const dir of [paths.blobs, paths.snapshots, paths.refs]) {
    try {
      mkdirSync(dir, { recursive: true });
    } catch (err) {
      throw pullError(
        where,
        "cache_unwritable",
        `cannot create ${dir} (${(err as NodeJS.ErrnoException).code ?? err}); set HF_HUB_CACHE or HF_HOME to a folder you can write`,
        { cache_dir: cacheDir },
      );
    }
  }
}

/** Fails before any byte is fetched when what is left to download, plus a margin, does not fit. */
function checkSpace(targets: BlobTarget[], cacheDir: string, probe: FreeSpaceProbe, where: PullWhere): void {
  const remaining = targets.reduce((sum, t) => {
    if (blobInPlace(t)) return sum; // a short one is fetched again: its partial resumed, as for no blob
    const partial = Math.min(partialSize(t.incomplete), t.size);
    return sum + t.size - partial;
  }, 0);
  if (remaining === 0) return;
  const free = probe(cacheDir);
  const short = spaceShortfall(remaining, free);
  if (short > 0)
    throw pullError(
      where,
      "disk_full",
      `needs ${mib(remaining)} MiB to download plus ${mib(SPACE_MARGIN_BYTES)} MiB to spare, but ${cacheDir} has ${mib(free)} MiB free`,
      { needed_bytes: remaining + SPACE_MARGIN_BYTES, available_bytes: free, cache_dir: cacheDir },
    );
}

const mib = (n: number) => Math.ceil(n / (1024 * 1024));
