import { readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { CoreError } from "../protocol/errors.ts";
import { HF_PREFIX, parseHfModelPath } from "../protocol/model-ref.ts";
import { abortable } from "../util/abortable.ts";
import type { DriveAnswers } from "../util/drive-answers.ts";
import { type ConfiguredModel, configuredModels } from "./model-entry.ts";
import { DEFAULT_MODEL_NAME } from "./model-schema.ts";
import type { Config } from "./schema.ts";

/**
 * Which model a request runs on (docs/models.md, "Several models"; docs/protocol.md#chat and
 * #embed). A path is made one spelling per file (`canonicalPath`); whether it is a GGUF the
 * `models` listing shows is the caller's question. `asGiven`: the request's own spelling where
 * it differs from `name` (a configured model's path, a relative path), which results show.
 */
export type ModelChoice =
  /** A configured model, by its name (or its path). */
  | { kind: "configured"; name: string; model: ConfiguredModel; asGiven?: string }
  /**
   * A GGUF by its path (absolute, through symlinks), or an `hf:` reference not in the cache.
   * `file`: where the name is a link's target, the file by its own name (`spelledFile`).
   */
  | { kind: "path"; name: string; asGiven?: string; file?: string };

/** The model a result names: as the request gave it (docs/protocol.md#chat). */
export const shownName = (choice: ModelChoice): string => choice.asGiven ?? choice.name;

/**
 * One spelling per file: a path resolved against the core's working folder (what llama-server,
 * its child, resolves a relative one against), through symlinks. A file gone since it was
 * loaded keeps the spelling it had (its folders' and its link's), so that its unload still
 * names the server running it. The native realpath: on Windows it answers the name on disk
 * (GetFinalPathNameByHandle), where the other keeps the request's case, 8.3 short name or
 * `\\?\` prefix, and one file spelled two ways got two llama-servers, its memory taken twice.
 */
export function canonicalPath(path: string): string {
  return throughLinks(resolve(path), 0);
}

/**
 * The file llama-server is given for a path whose target (`canonical`) is named as no GGUF is:
 * the link by its own name, its folders through links. The cache's snapshot holds links to blobs
 * named by their hash: given the blob, a split model's other parts (found by the first's name)
 * and an `auto` projector (found in the snapshot) were not, and the plan counted the first part
 * alone. A link to a file named `.gguf` gives that file, as before (its parts are beside it).
 */
function spelledFile(path: string, canonical: string, files: ModelFiles): string {
  if (canonical.toLowerCase().endsWith(".gguf")) return canonical;
  const abs = resolve(path);
  return join(files.canonical(dirname(abs)), basename(abs));
}

/**
 * How a request's path is matched to a configured model's file: `canonical` spells a path one way;
 * `cached` is where a configured `hf:` reference's file is in the Hugging Face cache now, null
 * when it is not there (models/model-files.ts: this floor does not read the cache).
 */
export interface ModelFiles {
  canonical(path: string): string;
  cached(hfRef: string): string | null;
  /** Asks a path's drive off the loop before `canonical`'s synchronous realpath (`answeringFiles`). */
  drives?: DriveAnswers;
  /** The cache folder `cached` and `cachedAsync` read (its ref and stat on the loop): its drive is asked first too. */
  cacheDir?: () => string;
  /** `cached` with the cache's snapshot listed off the loop: `answeringFiles` resolves ahead with it. */
  cachedAsync?(hfRef: string): Promise<string | null>;
}

/** Plain paths only: a configured `hf:` model is matched by its reference alone. */
export const plainFiles: ModelFiles = { canonical: canonicalPath, cached: () => null };

/**
 * `files` made safe to spell `ref` with (a request's model, or the config's for it): canonicalPath's
 * realpath is synchronous, and on a dead network mount it held the whole core, ping and cancel
 * too, for minutes. So a path, and the configured files it is matched against, are each asked
 * for a stat off the loop first. The request's path not answering is `model_missing`
 * (unreadable); a configured file not answering is matched by its spelling alone. A name asks
 * nothing: a chat by name costs no stat. `signal`: a cancel ends the wait at once (the stat
 * goes on, shared with whoever asks next), not after the drive's 30 s.
 */
export async function answeringFiles(
  config: Config,
  ref: string | undefined,
  files: ModelFiles,
  signal?: AbortSignal,
): Promise<ModelFiles> {
  const { drives } = files;
  const models = configuredModels(config);
  if (!drives || ref === undefined || models.some((m) => m.name === ref)) return files;
  // An `hf:` reference to a cached file is matched against the configured files as a path is
  // (findModel): their drives are asked too, and the cache's, read for it and for a configured
  // `hf:` model; the reference itself is no path the request gave.
  const hf = ref.startsWith(HF_PREFIX);
  if (hf ? models.some((m) => m.path === ref) : !looksLikePath(ref)) return files;
  const plain = models.map((m) => m.path).filter((p) => !p.startsWith(HF_PREFIX));
  const readsCache = hf || plain.length < models.length;
  const cache = readsCache ? files.cacheDir?.() : undefined;
  const paths = [...(hf ? [] : [ref]), ...plain, ...(cache === undefined ? [] : [cache])];
  const all = Promise.all(paths.map(async (p) => ((await drives.answers(resolve(p))) ? null : p)));
  const asked = await (signal ? abortable(all, signal) : all);
  if (!hf && asked[0] !== null) {
    const path = resolve(ref);
    // Refused unasked: other paths' stats hang on every file thread the core lets them hold.
    const why = drives.asking(path)
      ? `its drive did not answer within ${drives.waitMs / 1000} s`
      : "not asked while other paths' drives do not answer";
    throw new CoreError("model_missing", `model ${path}: unreadable: ${why} (a network drive offline?)`, {
      path,
      problem: "unreadable",
      field: "model",
    });
  }
  const silent = new Set(asked.filter((p) => p !== null));
  // The cache not answering: nothing is read in it (an `hf:` reference taken as given, its plan's
  // read asks the drive again and says unreadable; a configured one matched by its spelling).
  // Answering, the references findModel resolves are resolved here, each snapshot listed off the
  // loop: listed by `cached`, a snapshot of 10^4 files held ping and cancel at each such request.
  const hfRefs = [...(hf ? [ref] : []), ...models.map((m) => m.path).filter((p) => p.startsWith(HF_PREFIX))];
  const cacheSilent = cache !== undefined && silent.has(cache);
  let cached: ModelFiles["cached"] = cacheSilent ? () => null : files.cached;
  if (cache !== undefined && !cacheSilent) {
    const ahead = resolvedAhead(files, hfRefs);
    cached = await (signal ? abortable(ahead, signal) : ahead);
  }
  if (silent.size === 0) return { ...files, cached };
  return { ...files, cached, canonical: (p) => (silent.has(p) ? resolve(p) : files.canonical(p)) };
}

/** `files.cached` answered from `refs` resolved ahead by `cachedAsync`, where the files have it. */
async function resolvedAhead(files: ModelFiles, refs: string[]): Promise<ModelFiles["cached"]> {
  const { cachedAsync } = files;
  if (!cachedAsync) return files.cached;
  const known = new Map(await Promise.all(refs.map(async (r) => [r, await cachedAsync(r)] as const)));
  return (r) => (known.has(r) ? (known.get(r) ?? null) : files.cached(r));
}

/** SYMLOOP_MAX's usual value: a link that leads further than this is left as it is. */
const MAX_LINKS = 40;

function throughLinks(abs: string, links: number): string {
  try {
    return realpathSync.native(abs);
  } catch {
    const parent = dirname(abs);
    if (parent === abs) return abs;
    const here = join(throughLinks(parent, links), basename(abs));
    let target: string;
    try {
      target = readlinkSync(here);
    } catch {
      return here; // not there, or not a link
    }
    return links < MAX_LINKS ? throughLinks(resolve(dirname(here), target), links + 1) : here;
  }
}

/** A chat's model: the param, else the agent's, else `default`. */
export function chooseChatModel(
  config: Config,
  param: string | undefined,
  agent: { model: string } | undefined,
  files: ModelFiles = plainFiles,
): ModelChoice {
  const choice = findModel(config, param ?? agent?.model ?? DEFAULT_MODEL_NAME, files);
  if (choice.kind === "configured" && choice.model.kind === "embedding") {
    throw new CoreError(
      "invalid_request",
      `model: '${choice.name}' is an embedding model; a chat needs a model of kind chat`,
      { field: "model" },
    );
  }
  return choice;
}

/** An `embed`'s model: the param, else memory.embedding_model, else the first of kind embedding. */
export function chooseEmbedModel(
  config: Config,
  param: string | undefined,
  files: ModelFiles = plainFiles,
): ModelChoice {
  const name =
    param ?? config.memory.embedding_model ?? config.models.find((m) => m.kind === "embedding")?.name;
  if (name === undefined) {
    throw new CoreError(
      "invalid_request",
      "model: no model given and none configured for embeddings; add a models entry of kind embedding or set memory.embedding_model",
      { field: "model" },
    );
  }
  const choice = findModel(config, name, files);
  // A path not configured has no kind, and would be planned and started as a chat model, which
  // llama-server then refuses to embed with (a whole model loaded for a refusal).
  // (A config without `models` serves no other model at all: models-api.ts says so.)
  if (choice.kind === "path" && config.models.length > 0) {
    const embedders = config.models.filter((m) => m.kind === "embedding").map((m) => m.name);
    throw new CoreError(
      "invalid_request",
      `model: '${name}' is not a configured model; embed needs a models entry of kind embedding${embedders.length ? ` (${embedders.join(", ")})` : ""}`,
      { field: "model", reason: "model_not_found", available: embedders },
    );
  }
  if (choice.kind === "configured" && choice.model.kind !== "embedding") {
    throw new CoreError(
      "invalid_request",
      `model: '${choice.name}' is a chat model; embed needs a model of kind embedding`,
      { field: "model" },
    );
  }
  return choice;
}

/**
 * Any model by a request's reference (`models.load`, `models.unload`): a name of the config's, of
 * either kind, or a path or `hf:` reference; anything else is an unknown name. A path to a
 * configured model's file is that model (one llama-server per file, however it is spelled): an
 * `hf:` model's too, its file in the cache by its snapshot path (what the `models` listing shows).
 */
export function findModel(config: Config, ref: string, files: ModelFiles = plainFiles): ModelChoice {
  const models = configuredModels(config);
  const model = models.find((m) => m.name === ref);
  if (model) return { kind: "configured", name: ref, model };
  if (ref.startsWith(HF_PREFIX)) {
    checkHfRef(ref);
    // A configured model's own reference is that model: a second server of the same file would
    // take its memory twice.
    const same = models.find((m) => m.path === ref);
    if (same) return { kind: "configured", name: same.name, model: same, asGiven: ref };
    // Another reference to a cached file (the listing's `model_path` names it by file, a config by
    // quant; a quant's case): that file, or one file ran two llama-servers, its memory twice.
    const cached = files.cached(ref);
    return cached === null ? { kind: "path", name: ref } : byFile(models, cached, ref, files);
  }
  if (looksLikePath(ref)) return byFile(models, ref, ref, files);
  throw modelNotFound(config, ref);
}

/** The file at `given` as `ref` named it: the configured model that is that file, else the path. */
function byFile(models: ConfiguredModel[], given: string, ref: string, files: ModelFiles): ModelChoice {
  const path = files.canonical(given);
  const file = spelledFile(given, path, files);
  const same = models.find((m) => fileOf(m.path, files) === path);
  const asGiven = { asGiven: ref };
  if (same) return { kind: "configured", name: same.name, model: same, ...asGiven };
  return { kind: "path", name: path, ...(path === ref ? {} : asGiven), ...(file === path ? {} : { file }) };
}

/** A configured model's file, one spelling (`canonicalPath`); null: an `hf:` one not in the cache. */
function fileOf(path: string, files: ModelFiles): string | null {
  if (!path.startsWith(HF_PREFIX)) return files.canonical(path);
  const cached = files.cached(path);
  return cached === null ? null : files.canonical(cached);
}

/** A name that is neither configured nor a path: `model_not_found` with the names there are. */
export function modelNotFound(config: Config, ref: string): CoreError {
  const available = configuredModels(config).map((m) => m.name);
  return new CoreError(
    "invalid_request",
    `model: no model named '${ref}'; configured: ${available.join(", ")} (or give a GGUF's path or hf: reference)`,
    { field: "model", reason: "model_not_found", available },
  );
}

/** A path says so by a folder separator or the GGUF extension; a bare word is a name. */
export function looksLikePath(ref: string): boolean {
  return ref.includes("/") || ref.includes("\\") || ref.toLowerCase().endsWith(".gguf");
}

function checkHfRef(ref: string): void {
  try {
    parseHfModelPath(ref);
  } catch (err) {
    throw new CoreError("invalid_request", `model: ${(err as Error).message}`, { field: "model" });
  }
}
