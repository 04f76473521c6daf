import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { HF_PREFIX, parseHfModelPath } from "../protocol/model-ref.ts";
import type { LeftOut, ModelEntry } from "../protocol/models.ts";
import type { DriveAnswers } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { nextTurn } from "../util/next-turn.ts";
import { oneLanedAtATime } from "../util/one-at-a-time.ts";
import { within } from "../util/within.ts";
import { repoPaths } from "./hf-cache.ts";
import { type GgufGroup, groupGgufsSliced, isGgufPath, isProjector, missingText } from "./pick-gguf.ts";
import { readRefAsync, snapshotFilesAsync } from "./resolve.ts";
import { type FolderNames, folderNamesAsync } from "./utf8-names.ts";

// The `models` listing's models found on disk, before their headers are read (list.ts).

/** A model found on disk, before its header is read. */
export interface Candidate {
  source: ModelEntry["source"];
  repo: string | null;
  commit: string | null;
  refs: string[];
  file: string;
  /** Absolute paths of the parts (pick-gguf.ts GgufGroup.parts). */
  parts: string[];
  missing: string[];
  /** The missing parts as the verdict names them, `…` where more are missing than named. */
  missingText: string;
  model_path: string;
  /** A part's name is not UTF-8 (utf8-names.ts): nothing can open it by the name shown. */
  undecodable?: boolean;
}

/**
 * A folder's GGUFs, listed off the loop and waited for no longer than its stat (as the cache's
 * are): a folder whose stat answered can still hang its listing, and a readdirSync of it held the
 * whole core. One that cannot be listed, or does not answer, holds none.
 */
export async function folderCandidates(folder: string, reads: CacheReads): Promise<Candidate[]> {
  const list = reads.folderNames ?? folderNamesAsync;
  const found = await bounded(
    folderListings(`names:${folder}`, reads.drives, () => list(folder)),
    reads,
    folder,
  );
  if (found === null) return [];
  const names = found.names.filter((n) => isGgufPath(n) && !isProjector(n));
  // Made a slice a turn: the names are the folder's, 10,000 or more (folderNamesAsync's reason).
  const out: Candidate[] = [];
  const turn = stoppableTurn(reads);
  for (const [i, g] of (await groupGgufsSliced(names, turn)).entries()) {
    if (i > 0 && i % CANDIDATES_PER_TURN === 0) await turn();
    out.push(folderCandidate(folder, g, found.undecodable));
  }
  return out;
}

/**
 * A turn of the loop that ends the walk once the core stops: a folder of 400,000 names was
 * grouped and made candidates for seconds of turns before the listing saw the stop.
 */
function stoppableTurn(reads: CacheReads): () => Promise<void> {
  return () => nextTurn().then(() => reads.stop?.throwIfAborted());
}

/** Candidates made between two turns of the loop (`folderCandidates`). */
const CANDIDATES_PER_TURN = 256;

function folderCandidate(folder: string, g: GgufGroup, undecodable: ReadonlySet<string>): Candidate {
  return {
    source: "folder" as const,
    repo: null,
    commit: null,
    refs: [],
    file: g.first,
    parts: g.parts.map((p) => join(folder, p)),
    missing: g.missing,
    missingText: missingText(g),
    model_path: join(folder, g.first),
    undecodable: g.parts.some((p) => undecodable.has(p)),
  };
}

/** Tests: whose drives answer (and how long a listing is waited for), a folder's names, a snapshot's walk. */
export interface CacheReads {
  drives: DriveAnswers;
  readdir?(folder: string): Promise<string[]>;
  snapshotFiles?(snapshot: string): Promise<string[]>;
  folderNames?(folder: string): Promise<FolderNames>;
  /** The core's stop (list.ts ListDeps): the walk ends at the next repo, not after every wait. */
  stop?: AbortSignal;
  /** Tests: the whole cache walk's wait (`cachedCandidates`), twice the drive's wait otherwise. */
  walkWaitMs?: number;
  /** Where what is left out is said (the result's `left_out`), beside the log. */
  leftOut?: LeftOut[];
}

/** A cache walk's reads, its one deadline with them (`cachedCandidates`). */
type WalkReads = CacheReads & { deadline?: Deadline };

/** One wait for a whole walk: `over` is set before `reached` resolves, so a wait it ended sees it over. */
class Deadline {
  over = false;
  readonly reached: Promise<null>;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(ms: number) {
    this.reached = new Promise((resolve) => {
      this.timer = setTimeout(() => {
        this.over = true;
        resolve(null);
      }, ms);
    });
  }

  clear(): void {
    clearTimeout(this.timer);
  }
}

/**
 * The listings out, by folder, one at a time (util/one-at-a-time.ts `oneLanedAtATime`), each in
 * the drive's lanes (util/drive-answers.ts `laned`): `late` when not answered or not started. One
 * still hung after its wait is waited on again by a retry, never started beside itself: each
 * start held another thread, and a few retries over one dead folder took every lane.
 */
const listings = oneLanedAtATime<string[]>();
const folderListings = oneLanedAtATime<FolderNames>();

/**
 * Every snapshot of every cached model repo; snapshots a ref points at come first. Listed off the
 * loop, each listing waited for no longer than a stat (util/drive-answers.ts): a stat can answer
 * where the listing hangs (an NFS client answers from cached attributes, its server gone), and a
 * repo's folder may be a link onto another drive; a readdirSync of either held the whole core,
 * ping and cancel too. What does not answer is left out. The whole walk is waited for no longer
 * than two drive waits (docs/models.md, "`models`"): walked one after another, each repo a
 * dead link onto a share gone waited the full wait, and a cache of several took minutes to answer
 * `models`; what is left when it is over is left out, said in the log.
 */
export async function cachedCandidates(cacheDir: string, reads: CacheReads): Promise<Candidate[]> {
  // Twice a drive's wait: one dead repo's wait leaves the healthy ones after it their time.
  const deadline = new Deadline(reads.walkWaitMs ?? 2 * reads.drives.waitMs);
  const walk: WalkReads = { ...reads, deadline };
  try {
    const names = await namesIn(cacheDir, walk, cacheDir);
    if (names === null && deadline.over) reads.leftOut?.push({ path: cacheDir, reason: "deadline" });
    const dirs = (names ?? []).filter((d) => d.startsWith("models--")).sort();
    const out: Candidate[] = [];
    // Repos walked before the deadline: one it cut short (its snapshots left) is said with those left whole.
    let whole = 0;
    for (const dir of dirs) {
      reads.stop?.throwIfAborted();
      if (deadline.over) break;
      out.push(...(await repoCandidates(cacheDir, dir, walk)));
      if (!deadline.over) whole++;
    }
    const left = dirs.length - whole;
    for (const dir of dirs.slice(whole))
      reads.leftOut?.push({ path: join(cacheDir, dir), reason: "deadline" });
    if (left > 0)
      logger.warn(
        `the hub cache ${cacheDir} did not answer in time: ${left} repo${left === 1 ? "" : "s"} left out or cut short`,
      );
    return out;
  } finally {
    deadline.clear();
  }
}

async function repoCandidates(cacheDir: string, dir: string, reads: WalkReads): Promise<Candidate[]> {
  const repo = dir.slice("models--".length).split("--").join("/");
  const paths = repoPaths(cacheDir, repo);
  const answered = reads.drives.answers(join(cacheDir, dir)).then((yes) => yes || ("late" as const));
  if ((await bounded(answered, reads, join(cacheDir, dir))) === null) return [];
  const commits = await namesIn(paths.snapshots, reads, paths.snapshots);
  if (commits === null) return [];
  const refs = await readRefs(paths.refs, reads);
  const referenced = (c: string) => (refs.get(c)?.includes("main") ? 0 : refs.has(c) ? 1 : 2);
  commits.sort((a, b) => referenced(a) - referenced(b) || a.localeCompare(b));
  const out: Candidate[] = [];
  for (const commit of commits) {
    if (reads.deadline?.over) break;
    const snapshot = join(paths.snapshots, commit);
    const walk = reads.snapshotFiles ?? snapshotFilesAsync;
    const files = await bounded(
      listings(`walk:${snapshot}`, reads.drives, () => walk(snapshot)),
      reads,
      snapshot,
    );
    if (files === null) continue;
    const onRefs = refs.get(commit) ?? [];
    // Grouped a slice a turn: a snapshot may hold as many names as a folder (folderCandidates).
    for (const g of await groupGgufsSliced(
      files.filter((f) => !isProjector(f)),
      stoppableTurn(reads),
    ))
      out.push({
        source: "hf_cache",
        repo,
        commit,
        refs: onRefs,
        file: g.first,
        parts: g.parts.map((p) => join(snapshot, ...p.split("/"))),
        missing: g.missing,
        missingText: missingText(g),
        model_path: referenceOf(repo, g.first, onRefs) ?? join(snapshot, ...g.first.split("/")),
      });
  }
  return out;
}

/**
 * A folder's names; null when it cannot be listed or did not answer within the drive's wait
 * (said in `left_out` as `said`, when given).
 */
function namesIn(folder: string, reads: WalkReads, said?: string): Promise<string[] | null> {
  const list = reads.readdir ?? ((f: string) => readdir(f));
  return bounded(
    listings(`list:${folder}`, reads.drives, () => list(folder)),
    reads,
    said,
  );
}

/** What a bounded wait ended with other than an answer; `gone`: not there, so nothing is left out. */
type Unanswered = "no_answer" | "unreadable" | "gone" | "deadline";

/**
 * `work`'s answer, or null once it failed, was late, or the drive's wait or the walk's deadline
 * is over (it runs on unwatched). `said`: the path the result's `left_out` names when it did not
 * answer or could not be read; the walk's deadline is said by the walk, for the repos it left.
 */
async function bounded<T>(work: Promise<T | "late">, reads: WalkReads, said?: string): Promise<T | null> {
  const answer = within(
    work.then(
      (v): { v: T } | Unanswered => (v === "late" ? "no_answer" : { v }),
      (err): Unanswered => (isGone(err) ? "gone" : "unreadable"),
    ),
    reads.drives.waitMs,
    "no_answer" as const,
  );
  const deadline = reads.deadline?.reached.then(() => "deadline" as const);
  const out = await (deadline ? Promise.race([answer, deadline]) : answer);
  if (typeof out === "object") return out.v;
  if (said !== undefined && (out === "no_answer" || out === "unreadable"))
    reads.leftOut?.push({ path: said, reason: out });
  return null;
}

/** A folder that is not there (no cache yet, a repo with no snapshots) leaves nothing out. */
function isGone(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  return code === "ENOENT" || code === "ENOTDIR";
}

/**
 * The `hf:` reference a request can load a file of main's snapshot by, or null: a folder no hub
 * repo is named by (`models--a--b--c`) or a file no reference can name (a control character) is
 * offered by its path, never as a reference every request would refuse.
 */
function referenceOf(repo: string, file: string, refs: readonly string[]): string | null {
  if (!refs.includes("main")) return null;
  const ref = `${HF_PREFIX}${repo}:${file}`;
  try {
    parseHfModelPath(ref);
    return ref;
  } catch {
    return null;
  }
}

/** commit → the refs (main, tags, refs/pr/1 as pr/1) that name it, read off the loop as the listings are. */
async function readRefs(refsDir: string, reads: WalkReads): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const walk = async (dir: string, prefix: string, depth: number): Promise<void> => {
    const names = await namesIn(dir, reads);
    for (const name of (names ?? []).sort()) {
      // No git ref name starts with '.': such a name is a ref's temp a killed pull left (snapshot-link.ts).
      if (name.startsWith(".")) continue;
      const full = join(dir, name);
      const st = await bounded(
        reads.drives.laned(() => stat(full)),
        reads,
      );
      if (st?.isDirectory()) {
        if (depth < 4) await walk(full, `${prefix}${name}/`, depth + 1);
        continue;
      }
      // An unreadable ref names nothing.
      const commit = st
        ? await bounded(
            reads.drives.laned(() => readRefAsync(full)),
            reads,
          )
        : null;
      if (commit !== null) out.set(commit, [...(out.get(commit) ?? []), `${prefix}${name}`]);
    }
  };
  await walk(refsDir, "", 0);
  return out;
}
