import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { homedir } from "node:os";
import { chooseEmbedModel, type ModelChoice } from "../config/choose-model.ts";
import type { Config } from "../config/schema.ts";
import { hubCacheDir } from "../models/hf-cache.ts";
import { resolveModelPath } from "../models/resolve.ts";
import { adapterFiles } from "../plan/adapter-files.ts";
import { shownArgs } from "../plan/secret-args.ts";
import { HF_PREFIX } from "../protocol/model-ref.ts";
import { filesUnchangedNow, type LaunchFiles, type LaunchView } from "../runtime/launch.ts";
import type { ModelsApi } from "../runtime/models-api.ts";
import { refusedSpare } from "../runtime/scheduler-errors.ts";
import type { ChatsRunning } from "../store/embed-room.ts";
import { MemoryEmbedder } from "../store/memory-embedder.ts";
import type { Store } from "../store/store.ts";
import { abortable } from "../util/abortable.ts";
import { type DriveAnswers, drives } from "../util/drive-answers.ts";
import { type FileIdentity, identityOf } from "../util/file-identity.ts";
import { vectorArgs } from "./vector-flags.ts";

/**
 * Memory's embedding model wired to the store (docs/agent.md, "Memory"): made by the composition
 * root only when memory is on and `memory.embedding_model` names a model of kind embedding.
 * Its vectors go through several models' `embed`, so the model loads, shares memory and
 * unloads like any other.
 */
export function memoryEmbedder(
  config: Config,
  store: Store,
  models: ModelsApi,
  ask: DriveAnswers = drives,
  chats?: ChatsRunning,
): MemoryEmbedder | undefined {
  const name = config.memory.embedding_model;
  if (!config.memory.enabled || name === null) return undefined;
  const choice = chooseEmbedModel(config, name);
  const entry = config.models.find((m) => m.name === name);
  const path = entry?.path ?? name;
  // Asked off the loop at each run, recall and document: a model on a dead network mount held the core.
  const fingerprintNow = () =>
    embeddingFingerprintAsked(path, [...config.llama.extra_args, ...(entry?.extra_args ?? [])], ask);
  const embedder = new MemoryEmbedder({
    store,
    model: name,
    fingerprint: fingerprintNow,
    embed: (texts, signal, spare) => embedWith(models, choice, texts, signal, path, ask, spare),
    ...(chats ? { chats } : {}),
  });
  // Rows left without a vector (the folders indexed at the first open, another model's vectors,
  // a failure last time) are embedded once the core is up; the folders once they are read.
  embedder.kick();
  // The in-memory index read in slices now, not all at once by the first recall.
  // (Not while the model's drive does not answer: the first search reads it then.)
  void fingerprintNow().then(
    (fp) => store.memory.vectors.warm(fp),
    () => {},
  );
  void store.folderIndex.start().then(() => embedder.kick());
  // And what a folder's later walk adds (a file written while the core runs).
  store.folderIndex.onAdded(() => embedder.kick());
  return embedder;
}

/**
 * What a vector is valid for: the model file as it is now (path, size, modification time and
 * inode, as prompt reuse keys its saved slots: agent/kv/fingerprint.ts; a file replaced in place
 * is another model) and the flags it runs with (a `--pooling` there changes every vector). An
 * `hf:` reference is the cached file it resolves to now (`modelFileAsked`): keyed by the reference
 * alone, a pull of another revision (other weights, maybe another width) kept the old model's
 * vectors, searched with the new model's queries and never embedded again. The flags' secrets
 * (a key, a token: plan/secret-args.ts) are masked: they change no vector, and a rotated token
 * made every row of memory embedded again. Only the flags that may change a vector count
 * (server/vector-flags.ts): `--threads 4` added was every row embedded again too. The LoRA
 * adapters and control vectors they load are identified as the model is (plan/adapter-files.ts):
 * the flags name only their paths, and one retrained in place changes every vector. Without any,
 * the fingerprint is what it was before they counted. Each file's stat is asked off the loop
 * first (util/drive-answers.ts), its identity taken from that stat; an `hf:` reference's cache
 * folder asked before it is read to resolve it. Rejects when a drive does not answer: no
 * fingerprint is known then, and a guess would count every vector as another model's.
 */
export async function embeddingFingerprintAsked(
  path: string,
  extraArgs: readonly string[],
  ask: DriveAnswers = drives,
): Promise<string> {
  const model = (await modelFileAsked(path, ask)) ?? { path };
  const adapters = await Promise.all(
    adapterFiles(extraArgs).map(async (file) => (await identityAsked(file, ask)) ?? { path: file }),
  );
  return fingerprintOf(model, extraArgs, adapters);
}

function fingerprintOf(
  model: FileIdentity | { path: string },
  extraArgs: readonly string[],
  adapters: object[],
) {
  const flags = shownArgs(vectorArgs(extraArgs));
  return createHash("sha256")
    .update(JSON.stringify({ model, extraArgs: flags, ...(adapters.length > 0 ? { adapters } : {}) }))
    .digest("hex")
    .slice(0, 32);
}

/**
 * The model's file as a start would read it now, its stats asked off the loop; an `hf:` reference
 * resolved in the cache (offline, as the plan does) and through its snapshot's link to the blob,
 * so a later commit that leaves the file alone is the same model. Undefined when it cannot be
 * read (not pulled); rejects when a drive does not answer.
 */
async function modelFileAsked(path: string, ask: DriveAnswers): Promise<FileIdentity | undefined> {
  if (!path.startsWith(HF_PREFIX)) return identityAsked(path, ask);
  // Its ref and parts read synchronously (its snapshot listed off the loop): the cache folder's
  // drive asked first, as the plan's read does.
  await identityAsked(hubCacheDir(process.env, process.env.HOME || homedir()), ask);
  let file: string;
  try {
    file = realpathSync(await resolveModelPath(path));
  } catch {
    return undefined;
  }
  return identityAsked(file, ask);
}

/** The file's identity from a stat asked off the loop: undefined when it cannot be read. */
async function identityAsked(file: string, ask: DriveAnswers): Promise<FileIdentity | undefined> {
  const st = await ask.statOf(file);
  if (st === "late") throw new Error(`the drive of ${file} did not answer (a network drive offline?)`);
  return st === null ? undefined : identityOf(file, st);
}

/**
 * Whether the server's model file is the one `path` names now (the one the fingerprint keys),
 * its stats asked off the loop; `late` when a drive does not answer.
 */
async function startedOnCurrent(
  files: LaunchFiles | null,
  path: string | undefined,
  ask: DriveAnswers,
): Promise<boolean | "late"> {
  const then = files?.model;
  if (!then || path === undefined) return true;
  const now = await modelFileAsked(path, ask).catch(() => "late" as const);
  if (now === "late") return now;
  return now !== undefined && now.ino === then.ino && now.size === then.size && now.mtimeMs === then.mtimeMs;
}

/**
 * Vectors from the embedding model's server, refused when its model file is no longer the one
 * it was started with, or no longer the one the model's `path` names (an `hf:` reference whose
 * pull moved it to another revision: the old snapshot's file is still there, unchanged): they
 * would be kept under the new file's identity (`embeddingFingerprintAsked` reads the file as it is
 * now) though made by the old weights. The server is unloaded then, so the next try loads the
 * new file; meanwhile recall uses words alone. A restart, not the host's `models.unload`: a pin
 * its `models.load` gave, and a load of it waiting, stand (`keepPin`). `spare`: an ask whose load
 * takes free room only (runtime/scheduler.ts `acquire`): null when there was none for it.
 */
export async function embedWith(
  models: ModelsApi,
  choice: ModelChoice,
  texts: string[],
  signal: AbortSignal,
  path?: string,
  ask: DriveAnswers = drives,
  spare = false,
): Promise<number[][] | null> {
  let files: LaunchFiles | null = null;
  const onLaunch = (launch: LaunchView) => {
    files = launch.files;
  };
  const out = await models
    .embed(choice, texts, signal, onLaunch, spare ? { spare } : undefined)
    // Not loaded for a spare ask (no free room for it): nothing to log every turn; recall goes
    // by words, memory's job waits for chats to be idle (store/embed-room.ts).
    .catch((err) => (spare && refusedSpare(err) ? null : Promise.reject(err)));
  if (!out) return null;
  // Asked off the loop (each turn's recall embeds): a model on a dead network mount held the core
  // here. A cancel (the chat's, its recall) ends the wait at once, not after the drive's 30 s.
  const same = await abortable(filesUnchangedNow(files, ask), signal);
  const unchanged = same === true ? await abortable(startedOnCurrent(files, path, ask), signal) : same;
  if (unchanged === "late")
    throw new Error(
      "the embedding model's drive did not answer (a network drive offline?); its vectors are not kept",
    );
  if (unchanged) return out.embeddings;
  await models.unload(choice, { force: false, keepPin: true }).catch(() => {});
  throw new Error("the embedding model's file changed since its server loaded it; it is loaded again");
}
