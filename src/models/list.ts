import { realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, resolve } from "node:path";
import { llamaServerAsked } from "../config/find-binary-asked.ts";
import { configForModel, configuredModels } from "../config/model-entry.ts";
import type { Config, LoadedConfig } from "../config/schema.ts";
import { type GgufHeader, readGgufHeader } from "../plan/gguf-read.ts";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import { type ModelInfo, modelInfo, notAModel } from "../plan/model.ts";
import type { ProjectorChoice } from "../plan/projector.ts";
import { isCoreError } from "../protocol/errors.ts";
import { HF_PREFIX, parseHfModelPath } from "../protocol/model-ref.ts";
import { LEFT_OUT_MAX, type LeftOut, type ModelEntry, type ModelsResult } from "../protocol/models.ts";
import { abortable } from "../util/abortable.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { nextTurn } from "../util/next-turn.ts";
import { distinctPaths, sameFile } from "../util/same-file.ts";
import { brokenLinkOf } from "./broken-link.ts";
import { cachedPathOf } from "./configured-cached.ts";
import { findProjector } from "./find-projector.ts";
import { fitVerdict } from "./fit-verdict.ts";
import { type Env, hubCacheDir } from "./hf-cache.ts";
import { type Candidate, cachedCandidates, folderCandidates } from "./list-candidates.ts";
import { quantizationOf } from "./quantization.ts";

/**
 * Every GGUF model on this machine that local-ai can see — the Hugging Face cache's snapshots,
 * and the loose files beside the config and beside its model — each with its quantization, size
 * and the plan's verdict for this machine with the config's settings. Header reads only; a file
 * that cannot be read is listed with the reason. Projectors (`mmproj-*`) are not models and are
 * left out; a split model is one entry.
 */

export interface ListInput {
  config: Config;
  /** The config file's folder (the working directory when there is no file). */
  configDir: string;
  cacheDir: string;
  /** The files this core's llama-servers serve now (several models' `loaded`); none when absent. */
  loaded?: readonly string[];
}

export interface ListDeps {
  /** `binary`: the configured llama-server, asked for its devices (plan/probe.ts). */
  probe(binary?: string): Promise<HardwareSnapshot>;
  readHeader(path: string): Promise<GgufHeader>;
  /**
   * The core's stop (RequestContext.stopping): the listing ends at the next file with its reason.
   * `cancel` never reaches a listing; a stop must, or thousands of files outlast the host's wait.
   */
  stop: AbortSignal;
  /** Tests: whose drives answer (the core's shared one otherwise: util/drive-answers.ts). */
  drives: DriveAnswers;
}

export async function listModels(input: ListInput, deps: Partial<ListDeps> = {}): Promise<ModelsResult> {
  // Every path is asked for a stat off the loop before the synchronous walk touches it: on a dead
  // network mount (a folder, a linked file, model.path) one hung for minutes, the core with it.
  // The header reads (a model's, its projector's) ask the same drives as the walk.
  const ask = deps.drives ?? drives;
  const readHeader = deps.readHeader ?? ((path: string) => readGgufHeader(path, ask));
  // Asked a slice a turn, all waited on together: each question starts a timer and a promise,
  // and 10,000 asked in one stretch held the loop ~50 ms; one wait for all keeps a dead share's.
  const answering = async (paths: string[]) => {
    const asked: Promise<boolean>[] = [];
    for (const [i, p] of paths.entries()) {
      if (i > 0 && i % SLICE === 0) await nextTurn();
      asked.push(ask.answers(p));
    }
    const answers = await Promise.all(asked);
    return paths.filter((_, i) => answers[i]);
  };
  // What is not looked at is said in the result (docs/models.md "What was left out"), not only logged.
  const leftOut: LeftOut[] = [];
  // A Set: looked up in the array, a folder of 10,000 GGUFs held the loop ~0.3 s here.
  const silent = (paths: string[], answered: string[]) => {
    const heard = new Set(answered);
    for (const path of paths) if (!heard.has(path)) leftOut.push({ path, reason: "no_answer" });
    return answered;
  };
  const roots = scanRoots(input);
  const folders = scannedFolders(input, silent(roots, await answering(roots)));
  const reads = { drives: ask, leftOut, ...(deps.stop ? { stop: deps.stop } : {}) };
  const cached = silent([input.cacheDir], await answering([input.cacheDir])).length
    ? await cachedCandidates(input.cacheDir, reads)
    : [];
  const found = [...cached, ...(await Promise.all(folders.map((f) => folderCandidates(f, reads)))).flat()];
  // Every part asked, not only the first: a split's size and its broken-link check stat each part
  // synchronously, and a later part may be a link onto a share gone offline.
  const answered = new Set(await answering(found.flatMap((c) => c.parts)));
  const firsts = found.map((c) => c.parts[0]!);
  const reached = new Set(
    silent(
      firsts,
      firsts.filter((p) => answered.has(p)),
    ),
  );
  const candidates = await dedupe(found.filter((c) => reached.has(c.parts[0]!)));
  const reachable = async (path: string | null) =>
    path !== null && (await answering([path])).length ? path : null;
  const configured = await reachable(configuredPath(input, input.config.model.path, cached));
  const named = await Promise.all(
    configuredModels(input.config).map(async (m) => ({
      name: m.name,
      path: await reachable(configuredPath(input, m.path, cached)),
      mmproj: mmprojOf(input.config, m.name),
    })),
  );
  const loaded = input.loaded ?? [];
  let hardware: Promise<HardwareSnapshot> | undefined;
  const entries: ModelEntry[] = [];
  for (const c of candidates) {
    // A header and its plan take milliseconds, and no await in them waits on the loop: a folder
    // of thousands of GGUFs held a ping and shutdown until its end. The loop's turn comes first.
    await nextTurn();
    deps.stop?.throwIfAborted();
    hardware ??= llamaServerAsked(input.config).then((server) => (deps.probe ?? defaultProbe)(server));
    const path = c.parts[0]!;
    const as = named.find((m) => m.path !== null && sameFile(m.path, path));
    const probed = () => (deps.stop ? abortable(hardware!, deps.stop) : hardware!);
    const asked = { ...c, answered: c.parts.filter((p) => answered.has(p)) };
    const projector = (model: ModelInfo) => projectorOf(as?.mmproj ?? "auto", model, ask);
    const entry = await judge(asked, readHeader, probed, input.config, configured, projector);
    if (entry === null) continue;
    entries.push({ ...entry, name: as?.name ?? null, loaded: loaded.some((p) => sameFile(p, path)) });
  }
  return { models: sortModels(entries), cache_dir: input.cacheDir, folders, ...leftOutOf(leftOut) };
}

/**
 * The result's `left_out` and `left_out_total`, both absent when nothing was left out: each path
 * once (its first reason: two roots spelled alike, a repo both unanswered and cut), by path, the
 * first LEFT_OUT_MAX of them (docs/models.md "What was left out"): a cache of thousands of repos
 * on a share gone offline put thousands of paths in one answer.
 */
export function leftOutOf(all: LeftOut[]): Pick<ModelsResult, "left_out" | "left_out_total"> {
  const byPath = new Map<string, LeftOut>();
  for (const l of all) if (!byPath.has(l.path)) byPath.set(l.path, l);
  if (byPath.size === 0) return {};
  const sorted = [...byPath.values()].sort((a, b) => a.path.localeCompare(b.path));
  return { left_out: sorted.slice(0, LEFT_OUT_MAX), left_out_total: sorted.length };
}

/**
 * The core's shared probe: one beside a chat's plan would read its VRAM as used; looked at, not
 * taken, so `initialize`'s read-ahead is still the first chat's (plan/probe-ahead.ts).
 */
async function defaultProbe(binary?: string): Promise<HardwareSnapshot> {
  const { probeAhead } = await import("./local-plan-deps.ts");
  return probeAhead.look(binary);
}

/** Fitting first, largest first (more parameters or a finer quantization, and it still fits); then what does not fit, nearest to fitting first; then unreadable files. */
export function sortModels(entries: ModelEntry[]): ModelEntry[] {
  const rank = (e: ModelEntry) => (e.fits === true ? 0 : e.fits === false ? 1 : 2);
  return [...entries].sort((a, b) => {
    const r = rank(a) - rank(b);
    if (r !== 0) return r;
    const bySize =
      rank(a) === 0 ? b.size_bytes - a.size_bytes : rank(a) === 1 ? a.size_bytes - b.size_bytes : 0;
    return bySize !== 0 ? bySize : a.path.localeCompare(b.path);
  });
}

/** An entry as the file alone says it (null: not a model); `name` and `loaded` are the config's and the runtime's. */
async function judge(
  /** `answered`: its parts whose drive answered, the only ones stat'ed synchronously here. */
  c: Candidate & { answered: string[] },
  readHeader: (path: string) => Promise<GgufHeader>,
  hardware: () => Promise<HardwareSnapshot>,
  config: Config,
  configured: string | null,
  /** Its projector, as its `mmproj` setting finds it (a file's own is `auto`): whether it reads images. */
  projectorFor: (model: ModelInfo) => Promise<ProjectorChoice>,
): Promise<Omit<ModelEntry, "name" | "loaded"> | null> {
  const base = {
    path: c.parts[0]!,
    files: c.parts,
    source: c.source,
    repo: c.repo,
    commit: c.commit,
    refs: c.refs,
    file: c.file,
    model_path: c.model_path,
    configured: configured !== null && sameFile(configured, c.parts[0]!),
  };
  const unreadable = (problem: ModelEntry["problem"], verdict: string) => ({
    ...base,
    size_bytes: c.answered.reduce((n, p) => n + sizeOf(p), 0),
    quantization: null,
    architecture: null,
    parameters: null,
    fits: null,
    context_per_slot: null,
    vision: null,
    verdict,
    problem,
  });
  if (c.missing.length > 0) return unreadable("incomplete_split", `split model: ${c.missingText} missing`);
  if (c.undecodable)
    return unreadable(
      "unreadable",
      `${base.path}: the file name is not valid UTF-8 (its bytes shown as \ufffd), so no config or request can name it; rename it`,
    );
  let header: GgufHeader;
  try {
    header = await readHeader(c.parts[0]!);
  } catch (err) {
    if (!isCoreError(err)) throw err;
    const problem = (err.data?.problem as ModelEntry["problem"]) ?? "unreadable";
    // A loop of links is unreadable, not absent (plan/gguf-read.ts): a broken link all the same.
    const broken =
      problem === "absent" || problem === "unreadable" ? brokenLinkOf(c.answered, c.source) : undefined;
    if (broken) return unreadable("broken_link", broken);
    return unreadable(problem, err.message);
  }
  const model = modelInfo(header);
  // A projector named otherwise than mmproj-* is one all the same: not a model (plan/model.ts).
  if (notAModel(model)) return null;
  const projector = await projectorFor(model);
  const fit = fitVerdict(model, await hardware(), config, projector);
  return {
    ...base,
    size_bytes: header.size_bytes,
    quantization: quantizationOf(header, model),
    architecture: model.architecture,
    parameters: model.parameters,
    fits: fit.fits,
    context_per_slot: fit.context_per_slot,
    vision: projector.kind === "found",
    verdict: fit.fits === false ? `does not fit: ${fit.message}` : fit.message,
    problem: null,
  };
}

/** A configured model's `mmproj` setting; `auto` for a model the config does not name. */
function mmprojOf(config: Config, name: string): string {
  return configForModel(config, name)?.model.mmproj ?? "auto";
}

/**
 * The projector its setting finds (docs/models.md "The projector"): it reads images, and the
 * verdict counts its memory. One that cannot serve it is none here (the plan names it).
 */
async function projectorOf(mmproj: string, model: ModelInfo, drives: DriveAnswers): Promise<ProjectorChoice> {
  try {
    return await findProjector(mmproj, model, undefined, { drives });
  } catch (err) {
    if (isCoreError(err)) return { kind: "none", reason: err.message };
    throw err;
  }
}

/** The config's folder and its model's folder (an `hf:` model lives in the cache, already scanned). */
function scanRoots(input: ListInput): string[] {
  const folders = [resolve(input.configDir)];
  const path = input.config.model.path;
  if (!path.startsWith(HF_PREFIX)) folders.push(dirname(resolve(input.configDir, path)));
  return folders;
}

/** The roots whose drive answered, each once however spelled; one that did not is left out and logged. */
function scannedFolders(input: ListInput, answered: string[]): string[] {
  for (const silent of scanRoots(input).filter((f) => !answered.includes(f)))
    logger.warn(`models: ${silent} not listed: its drive did not answer (a network drive offline?)`);
  return distinctPaths(answered);
}

/**
 * A configured model's file: its path, or where the cache walk found its `hf:` reference (null:
 * not found whole; configured-cached.ts, no disk read: a synchronous one hung on a dead share).
 */
function configuredPath(input: ListInput, path: string, cached: readonly Candidate[]): string | null {
  if (!path.startsWith(HF_PREFIX)) return resolve(input.configDir, path);
  try {
    return cachedPathOf(parseHfModelPath(path)!, cached);
  } catch {
    return null;
  }
}

/** Paths asked, or resolved, between two turns of the loop: 10,000 realpath calls held it ~45 ms. */
const SLICE = 256;

/** One entry per file on disk: the cache's link and a folder's link to the same blob are one model (the cache's, listed first, wins). */
async function dedupe(candidates: Candidate[]): Promise<Candidate[]> {
  const seen = new Set<string>();
  const kept: Candidate[] = [];
  for (const [i, c] of candidates.entries()) {
    if (i > 0 && i % SLICE === 0) await nextTurn();
    const key = realOrSelf(c.parts[0]!);
    if (seen.has(key)) continue;
    seen.add(key);
    kept.push(c);
  }
  return kept;
}

/**
 * The file as the OS resolves it. The native call: on Windows the other keeps the spelling given
 * (case, 8.3 short name, subst drive, `\\?\`), and one folder spelled two ways (the config's and
 * model.path's) listed its models twice, and a loaded model (canonicalPath's name on disk) unmarked.
 */
function realOrSelf(path: string): string {
  try {
    return realpathSync.native(path);
  } catch {
    return path;
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

/** Where `models` reads the config: the file, or the defaults when there is none (the cache is listed either way). */
export interface ListConfigSource {
  /** Throws CoreError config_missing / config_invalid. */
  loadedConfig(): LoadedConfig;
  defaultConfig(): LoadedConfig;
  /** The files this core's llama-servers serve now; none when absent (the CLI). */
  loadedModels?(): readonly string[];
}

/** `models` as the method and the CLI run it: a missing config lists with the defaults; an invalid one is an error. */
export async function listModelsFor(
  source: ListConfigSource,
  env: Env = process.env,
  deps: Partial<ListDeps> = {},
): Promise<ModelsResult> {
  let loaded: LoadedConfig;
  try {
    loaded = source.loadedConfig();
  } catch (err) {
    if (!isCoreError(err) || err.code !== "config_missing") throw err;
    loaded = source.defaultConfig();
  }
  const cacheDir = hubCacheDir(env, env.HOME || homedir());
  return listModels(
    { config: loaded.config, configDir: loaded.dir, cacheDir, loaded: source.loadedModels?.() },
    deps,
  );
}
