import { shardFileName, shardName } from "../plan/shard-name.ts";
import type { ModelRef } from "../protocol/model-ref.ts";

/**
 * Which GGUF a reference means, among a repo's file paths (a cached snapshot's or the hub's
 * listing). Pure: the cache resolver and the remote fit check share it.
 */

/** One model as a repo holds it: a single file, or the parts of a split GGUF counted once. */
export interface GgufGroup {
  /** The file llama-server is given: the single file, or the first part (`-00001-of-0000N`). */
  first: string;
  /**
   * Every part the name promises, in order (just `first` when not split); for a split cut short,
   * those up to its last missing part named, then the parts present past it (what is on disk is
   * all listed: a host deletes a broken split by its `files`).
   */
  parts: string[];
  /** How many parts the name promises (1 when not split). */
  total: number;
  /** The parts the paths lack (a split model cut short): the first MISSING_NAMED of them. */
  missing: string[];
}

/**
 * A split cut short names at most this many of its missing parts: it is refused whatever the
 * rest are, and a name claiming `-of-99999` made 99,998 names for each such file listed.
 */
export const MISSING_NAMED = 10;

export type GgufPick =
  | { kind: "one"; group: GgufGroup }
  | { kind: "none"; available: string[] }
  | { kind: "many"; matches: string[] };

/**
 * The most GGUF files a hub listing may name (docs/models.md "The hub's listing"): the pick
 * groups, sorts and matches them all in one stretch of the loop, and a hostile hub's 400,000
 * names held `ping` and `cancel` ~3.4 s. The largest real GGUF repos name a few hundred; a
 * listing past the bound is refused before any pick.
 */
export const MAX_LISTED_GGUFS = 10_000;

/** Why a listing past MAX_LISTED_GGUFS is refused (pull's `hub_error`, the fit check's). */
const TOO_MANY_GGUFS = `the hub's file listing names more than ${MAX_LISTED_GGUFS.toLocaleString("en")} GGUF files, the most a pick takes`;

export function isGgufPath(path: string): boolean {
  return path.toLowerCase().endsWith(".gguf");
}

/**
 * A listed file kept in `files` when it is a GGUF (the others let go once checked), `refuse`d
 * with TOO_MANY_GGUFS when it would be the one past MAX_LISTED_GGUFS: a pull's listing and the
 * fit check's (hub-client.ts, hub-listing.ts) keep alike.
 */
export function keepGguf<T extends { path: string }>(
  files: T[],
  file: T | null | undefined,
  refuse: (why: string) => Error,
): void {
  if (!file || !isGgufPath(file.path)) return;
  if (files.length === MAX_LISTED_GGUFS) throw refuse(TOO_MANY_GGUFS);
  files.push(file);
}

/**
 * Multimodal projectors ship beside the model with `mmproj` in their name, first
 * (`mmproj-F16.gguf`) or as a word of it (second-state's `llava-v1.5-7b-mmproj-model-f16.gguf`):
 * never the model itself, so `:F16` never picks one as the model.
 */
export function isProjector(path: string): boolean {
  return /^mmproj|[-._]mmproj([-._]|$)/i.test(path.split("/").at(-1) ?? path);
}

/** The repo's GGUFs, split parts gathered under their first part; sorted by that path. */
export function groupGgufs(paths: readonly string[]): GgufGroup[] {
  const steps = grouping(paths);
  let step = steps.next();
  while (!step.done) step = steps.next();
  return step.value;
}

/** Names grouped between two turns of the loop (`groupGgufsSliced`). */
const GROUPED_A_TURN = 4096;

/**
 * groupGgufs with `turn` awaited every GROUPED_A_TURN names (the `models` listing's folders and
 * snapshots, docs/models.md "`models`"): a folder of 400,000 GGUF names held the loop ~1.6 s in
 * one stretch. Its two sorts are still one stretch each (~0.3 s at 400,000 names, the longest).
 */
export async function groupGgufsSliced(
  paths: readonly string[],
  turn: () => Promise<void>,
): Promise<GgufGroup[]> {
  const steps = grouping(paths);
  let step = steps.next();
  while (!step.done) {
    await turn();
    step = steps.next();
  }
  return step.value;
}

/** groupGgufs' work, yielding every GROUPED_A_TURN names: run through at once, or a turn between. */
function* grouping(paths: readonly string[]): Generator<void, GgufGroup[]> {
  const present = new Set<string>();
  for (const [i, path] of paths.entries()) {
    if (i > 0 && i % GROUPED_A_TURN === 0) yield;
    if (isGgufPath(path)) present.add(path);
  }
  const groups = new Map<string, GgufGroup>();
  /** How many parts splitGroup named of each split: a part present past them is added as met. */
  const named = new Map<string, number>();
  for (const [i, path] of [...present].sort().entries()) {
    if (i > 0 && i % GROUPED_A_TURN === 0) yield;
    const shard = shardName(path, true);
    if (!shard) {
      groups.set(path, { first: path, parts: [path], total: 1, missing: [] });
      continue;
    }
    const { stem, total } = shard;
    const key = `${stem}\0${total}`;
    const group = groups.get(key);
    if (!group) {
      const made = splitGroup(stem, total, present);
      groups.set(key, made);
      named.set(key, made.parts.length);
    } else if (shard.part > named.get(key)! && path === shardFileName(stem, shard.part, total)) {
      // Sorted, so these come in order; the work is the listing's, not the total's.
      group.parts.push(path);
    }
  }
  return [...groups.values()].sort((a, b) => a.first.localeCompare(b.first));
}

/**
 * A split's parts in order, up to its MISSING_NAMED-th missing one: the work is what the listing
 * holds of it, not the total its name claims (a hostile or broken listing's `-of-99999`).
 */
function splitGroup(stem: string, total: number, present: ReadonlySet<string>): GgufGroup {
  const parts: string[] = [];
  const missing: string[] = [];
  for (let i = 1; i <= total && missing.length < MISSING_NAMED; i++) {
    const name = shardFileName(stem, i, total);
    parts.push(name);
    if (!present.has(name)) missing.push(name);
  }
  return { first: parts[0]!, parts, total, missing };
}

/** A split's missing parts as a message names them, `…` where more are missing than named. */
export function missingText(group: GgufGroup): string {
  return `${group.missing.join(", ")}${group.parts.length < group.total ? ", …" : ""}`;
}

/**
 * Whether a path names a file of this quantization: the quant appears as its own token,
 * case-insensitively (`model-Q4_K_M.gguf`, `model.q4_k_m-00001-of-00002.gguf`,
 * `Q4_K_M/model-00001-of-00002.gguf`), so `Q4_K` does not match `Q4_K_M` nor `Q4_0` `IQ4_0`.
 */
export function matchesQuant(path: string, quant: string): boolean {
  return quantMatcher(quant)(path);
}

/** matchesQuant for one quantization, its pattern made once: a pick made one per model listed. */
function quantMatcher(quant: string): (path: string) => boolean {
  const q = quant.toLowerCase().replace(/[.\\^$*+?()[\]{}|]/g, "\\$&");
  const pattern = new RegExp(`(^|[-._/])${q}($|[-./])`);
  return (path) => pattern.test(path.replace(/\.gguf$/i, "").toLowerCase());
}

/** The model a ref names among `paths`: by file, by quantization, or the only model there is. */
export function pickGguf(paths: readonly string[], ref: Pick<ModelRef, "quant" | "file">): GgufPick {
  return pickAmong(groupGgufs(paths), paths, ref);
}

/** pickGguf over `paths` already grouped (`groups`: groupGgufs(paths)), for a caller that needs the groups too. */
export function pickAmong(
  groups: readonly GgufGroup[],
  paths: readonly string[],
  ref: Pick<ModelRef, "quant" | "file">,
): GgufPick {
  const models = groups.filter((g) => !isProjector(g.first));
  const available = models.map((g) => g.first);
  if (ref.file !== undefined) {
    // The part's own model by its first part's name: the parts of a split cut short are not all named.
    const shard = shardName(ref.file, true);
    const first = shard ? shardFileName(shard.stem, 1, shard.total) : ref.file;
    const group = groups.find((g) => g.first === first);
    // A part that is listed names its model; a part the listing lacks is not there.
    return group && paths.includes(ref.file) ? { kind: "one", group } : { kind: "none", available };
  }
  const matching = ref.quant === undefined ? null : quantMatcher(ref.quant);
  const matches = matching ? models.filter((g) => matching(g.first)) : models;
  if (matches.length === 1) return { kind: "one", group: matches[0]! };
  if (matches.length === 0) return { kind: "none", available };
  return { kind: "many", matches: matches.map((g) => g.first) };
}
