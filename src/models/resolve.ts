import { type Dirent, existsSync, statSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { homedir } from "node:os";
import { join, relative } from "node:path";
import { REQUEST_MODEL_KEY, settingData } from "../config/model-entry.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import { HF_PREFIX, type ModelRef, parseHfModelPath, pullCommand } from "../protocol/model-ref.ts";
import { answersFor, type DriveAnswers } from "../util/drive-answers.ts";
import { listedNames, namesText } from "../util/listed-names.ts";
import { oneLanedAtATime } from "../util/one-at-a-time.ts";
import {
  FileTooLarge,
  kindOf,
  NotRegularFile,
  readSmallFile,
  readSmallFileAsync,
} from "../util/read-file.ts";
import { within } from "../util/within.ts";
import { type Env, hubCacheDir, refPath, repoPaths } from "./hf-cache.ts";
import { isGgufPath, missingText, pickGguf } from "./pick-gguf.ts";

/**
 * `model.path: hf:org/name:Q4_K_M` → the file in the Hugging Face cache, offline: refs/<revision>
 * names a commit, snapshots/<commit>/ holds the files (links to blobs). Reads the disk only,
 * never the network, whatever HF_HUB_OFFLINE says.
 *
 * The config loader keeps `hf:` paths as written (it does no IO); the plan's model read
 * (src/plan/launch.ts) calls resolveModelPath, so plan, chat and doctor resolve alike.
 */

/** Why a cached model cannot be used; each is fixed by pulling it (again). */
export type CacheProblem = "not_downloaded" | "broken_ref" | "broken_link" | "incomplete_split";

export type CacheResolution =
  | { kind: "found"; path: string; files: string[]; commit: string; file: string }
  | { kind: "missing"; problem: CacheProblem; detail: string }
  | { kind: "ambiguous"; matches: string[] };

const COMMIT = /^[0-9a-f]{40}$/;

/** The commit a revision names in the cache: a ref's content, or the revision itself when it is a commit. */
function cachedCommit(
  ref: ModelRef,
  cacheDir: string,
): { commit: string; snapshot: string } | Extract<CacheResolution, { kind: "missing" }> {
  const paths = repoPaths(cacheDir, ref.repo);
  if (COMMIT.test(ref.revision) && existsSync(join(paths.snapshots, ref.revision)))
    return { commit: ref.revision, snapshot: join(paths.snapshots, ref.revision) };
  const refFile = refPath(cacheDir, ref.repo, ref.revision);
  let text: string;
  try {
    text = readRef(refFile);
  } catch (err) {
    if (err instanceof NotRegularFile || err instanceof FileTooLarge)
      return { kind: "missing", problem: "broken_ref", detail: `the cache's ${err.message}` };
    const where = existsSync(paths.root) ? `revision ${ref.revision} was never pulled` : "not in the cache";
    return { kind: "missing", problem: "not_downloaded", detail: `${where} (${paths.root})` };
  }
  if (!COMMIT.test(text))
    return {
      kind: "missing",
      problem: "broken_ref",
      detail: `the cache's ${refFile} does not hold a commit hash`,
    };
  const snapshot = join(paths.snapshots, text);
  if (!isDirectory(snapshot))
    return {
      kind: "missing",
      problem: "broken_ref",
      detail: `the cache's refs/${ref.revision} names commit ${text}, whose snapshot folder is missing`,
    };
  return { commit: text, snapshot };
}

/** Tests: the drives whose lanes and wait bound the snapshot's listing, and the listing itself. */
export interface SnapshotListOptions {
  drives?: DriveAnswers;
  snapshotFiles?: (snapshot: string) => Promise<string[]>;
}

/** A snapshot whose listing did not answer within the drives' wait: its model is unreadable. */
export type LateListing = { kind: "late"; detail: string };

/** The snapshots' listings out, one per folder, in the drives' lanes (util/one-at-a-time.ts). */
const listings = oneLanedAtATime<string[]>();

/**
 * A snapshot's walk in the one lane per folder that a resolve and `mmproj: auto`'s search
 * (models/find-projector.ts) share: apart, a plan and a listing's search of one snapshot on a dead
 * share each held a file thread. Shared while in flight only, never kept: a pull (this core's, or
 * another tool's on the shared cache) adds a projector between a plan's model read and its search.
 */
export function snapshotListing(
  snapshot: string,
  answers: DriveAnswers,
  list: (snapshot: string) => Promise<string[]>,
): Promise<string[] | "late"> {
  return listings(snapshot, answers, () => list(snapshot));
}

/**
 * Resolves a ref against the cache, reading only the disk, the snapshot listed off the loop
 * (`snapshotFilesAsync`): a snapshot of 10^4 files, or one on a network drive gone offline,
 * held ping and cancel at every plan. The rest
 * is a ref's read and a stat a part, after the cache folder's drive was asked (plan/model-memo.ts).
 * The listing is waited for no longer than a stat, in the drives' lanes, one per snapshot (later
 * callers share it), as models/find-projector.ts lists one: a share whose stat answered can hang
 * its listing, and unbounded, the plan waited for good, each new plan holding one more file thread.
 */
export async function resolveCached(
  ref: ModelRef,
  cacheDir: string,
  options: SnapshotListOptions = {},
): Promise<CacheResolution | LateListing> {
  const at = cachedCommit(ref, cacheDir);
  if ("kind" in at) return at;
  const answers = options.drives ?? answersFor({});
  const list = options.snapshotFiles ?? snapshotFilesAsync;
  const listing = snapshotListing(at.snapshot, answers, list);
  const files = await within(listing, answers.waitMs, "late" as const);
  if (files !== "late") return picked(ref, at, files);
  const detail = `its snapshot ${at.snapshot} did not answer within ${answers.waitMs / 1000} s (a network drive offline?)`;
  return { kind: "late", detail };
}

/** The snapshot's file `ref` names among its GGUFs `files`, or why there is none to use. */
function picked(ref: ModelRef, at: { commit: string; snapshot: string }, files: string[]): CacheResolution {
  const pick = pickGguf(files, ref);
  if (pick.kind === "many") return { kind: "ambiguous", matches: pick.matches };
  if (pick.kind === "none") {
    const wanted = ref.file ?? (ref.quant ? `a ${ref.quant} GGUF` : "a GGUF model");
    // Named as the listing's other errors name them (util/listed-names.ts): a snapshot's names are unbounded.
    const cached = pick.available.length ? `only ${namesText(pick.available)}` : "no GGUF model";
    return {
      kind: "missing",
      problem: "not_downloaded",
      detail: `${wanted} is not in the cached snapshot ${at.commit.slice(0, 12)} (it holds ${cached})`,
    };
  }
  const { group } = pick;
  if (group.missing.length > 0)
    return {
      kind: "missing",
      problem: "incomplete_split",
      detail: `split model ${group.first} lacks ${missingText(group)} in the cache`,
    };
  const paths = group.parts.map((p) => join(at.snapshot, ...p.split("/")));
  for (const [i, part] of group.parts.entries()) {
    const kind = fileKindAt(paths[i]!);
    if (kind === "file") continue;
    const detail =
      kind === null
        ? `the cache's link for ${part} points at a blob that is missing`
        : `the cache's ${part} is not a regular file (${kind})`;
    return { kind: "missing", problem: "broken_link", detail };
  }
  return { kind: "found", path: paths[0]!, files: paths, commit: at.commit, file: group.first };
}

/**
 * A model path as llama-server needs it: a plain path unchanged; `hf:…` the cached file, or a
 * CoreError `model_missing` naming the `local-ai pull` command that fetches it (`config_invalid`
 * when several cached files match and the ref must name one). The snapshot listed off the loop.
 */
export async function resolveModelPath(
  path: string,
  env: Env = process.env,
  home = env.HOME || homedir(),
  /** The config key that holds `path`, for a refusal to name (a projector's is model.mmproj). */
  key = "model.path",
  options: SnapshotListOptions = {},
): Promise<string> {
  if (!path.startsWith(HF_PREFIX)) return path;
  const { ref, cacheDir } = hfRefOf(path, env, home, key);
  const found = await resolveCached(ref, cacheDir, options);
  if (found.kind !== "late") return foundPath(path, key, ref, found, cacheDir);
  // Refused as the model memo refuses a file whose drive does not answer (plan/model-memo.ts).
  throw new CoreError("model_missing", `model ${path}: unreadable: ${found.detail}`, {
    path,
    ...settingData(key),
    problem: "unreadable",
  });
}

function hfRefOf(path: string, env: Env, home: string, key: string): { ref: ModelRef; cacheDir: string } {
  let ref: ModelRef;
  try {
    ref = parseHfModelPath(path)!;
  } catch (err) {
    throw new CoreError(refusalCode(key), `${key}: ${(err as Error).message}`, settingData(key));
  }
  return { ref, cacheDir: hubCacheDir(env, home) };
}

/** The resolution's file, else the refusal that names what to do. */
function foundPath(
  path: string,
  key: string,
  ref: ModelRef,
  found: CacheResolution,
  cacheDir: string,
): string {
  if (found.kind === "found") return found.path;
  if (found.kind === "ambiguous") {
    const hint = `${HF_PREFIX}${ref.repo}:${found.matches[0]}`;
    throw new CoreError(
      refusalCode(key),
      `${key} ${path}: ${found.matches.length} cached files match: ${namesText(found.matches)}; name one, as in ${hint}`,
      { ...settingData(key), ...listedNames("matches", found.matches) },
    );
  }
  throw notDownloaded(path, key, ref, found, cacheDir);
}

function notDownloaded(
  path: string,
  key: string,
  ref: ModelRef,
  missing: Extract<CacheResolution, { kind: "missing" }>,
  cacheDir: string,
): CoreError {
  const pull = pullCommand(ref);
  return new CoreError("model_missing", `model ${path}: ${missing.detail}; fetch it with: ${pull}`, {
    path,
    ...settingData(key),
    problem: missing.problem,
    repo: ref.repo,
    revision: ref.revision,
    cache_dir: cacheDir,
    pull,
  });
}

/** A reference the config holds is the config's fault; one a request gave is the request's. */
function refusalCode(key: string): "config_invalid" | "invalid_request" {
  return key === REQUEST_MODEL_KEY ? "invalid_request" : "config_invalid";
}

/** True for the CoreError resolveModelPath throws when a hub model is simply not (fully) in the cache. */
export function isNotDownloaded(err: unknown): err is CoreError {
  return err instanceof CoreError && err.code === "model_missing" && typeof err.data?.pull === "string";
}

/**
 * Every `.gguf` path in a snapshot, relative to it with `/`, links included even when dangling;
 * each folder listed by the runtime's file threads, so a snapshot on a network drive that went
 * offline holds the caller, not `ping` and `cancel` (the plan's reads, models/find-projector.ts).
 */
export async function snapshotFilesAsync(snapshot: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string, depth: number): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const sub of kept(snapshot, dir, entries, depth, out)) await walk(sub, depth + 1);
  };
  await walk(snapshot, 0);
  return out.sort();
}

/** A folder's GGUFs added to `out`; its subfolders to walk, eight deep at most. */
function kept(snapshot: string, dir: string, entries: Dirent[], depth: number, out: string[]): string[] {
  const subs: string[] = [];
  for (const e of entries) {
    const full = join(dir, e.name);
    if (e.isDirectory() && depth < 8) subs.push(full);
    else if (!e.isDirectory() && isGgufPath(e.name)) out.push(relative(snapshot, full).split("\\").join("/"));
  }
  return subs;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** "file" for a regular file (links followed), what it is otherwise, null when nothing is there. */
function fileKindAt(path: string): string | null {
  try {
    const stats = statSync(path);
    return stats.isFile() ? "file" : kindOf(stats);
  } catch {
    return null;
  }
}

/** A ref holds a 40-character commit; anything much longer is not one. */
const REF_MAX_BYTES = 4096;

/** What a ref file holds, trimmed; never a blocking read (a FIFO is NotRegularFile). */
export function readRef(file: string): string {
  return readSmallFile(file, REF_MAX_BYTES).trim();
}

/** readRef off the loop (models/list-candidates.ts). */
export async function readRefAsync(file: string): Promise<string> {
  return (await readSmallFileAsync(file, REF_MAX_BYTES)).trim();
}

/**
 * An `hf:` model whose cached file reads as cut short (`truncated`) names the pull that fetches
 * it again: a core before the blob's flush (download.ts) could rename a verified download whose
 * bytes a power cut then lost, and offline nothing knows its listed size to find it sooner. A
 * pull again sees the short blob and downloads it (docs/models.md "The cache").
 */
export function withPullAgain(path: string, err: unknown): unknown {
  if (!isCoreError(err) || err.data?.problem !== "truncated" || err.data.pull !== undefined) return err;
  let ref: ModelRef | undefined;
  try {
    ref = parseHfModelPath(path);
  } catch {
    return err;
  }
  if (!ref) return err;
  const pull = pullCommand(ref);
  const again = new CoreError(err.code, `${err.message}; pull it again with: ${pull}`, { ...err.data, pull });
  again.stack = err.stack;
  return again;
}
