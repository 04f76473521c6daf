import { createHash } from "node:crypto";
import type { Config } from "../../config/schema.ts";
import type { LlamaProps } from "../../llama/props.ts";
import { adapterFiles } from "../../plan/adapter-files.ts";
import { shownArgs } from "../../plan/secret-args.ts";
import { changedFileNow, type LaunchFiles, type LaunchView } from "../../runtime/launch.ts";
import { type DriveAnswers, drives } from "../../util/drive-answers.ts";
import { type FileIdentity, fileIdentity } from "../../util/file-identity.ts";
import { logger } from "../../util/logger.ts";
import { kvArgs } from "./kv-flags.ts";

/**
 * What a saved slot is valid for. The file names no model: a model of the same shape restores
 * another's file without complaint and would answer from a KV cache it never computed
 * (test/fixtures/llama-server/transcripts/93d). So each file is keyed by a fingerprint of
 * everything that shapes the cache: the model file (its path, size, modification time and inode: a
 * file replaced in place is another model), the context per slot, the KV cache types and flash
 * attention (the V layout), the chat template (the same words render to other tokens under another
 * one), llama-server's build (its file format), and the flags passed through (a models entry's
 * too: `--rope-freq-base` or a `--lora` there changes what every cached K holds) but those that
 * cannot change a state's validity (threads, the HTTP server, the log: kv-flags.ts), a key's or
 * token's value masked as the plan report shows it (plan/secret-args.ts: it changes no cache, a
 * rotated one dropped every saved slot, and each sidecar kept a hash of it); and the
 * vision projector (`--mmproj`), identified as the model is: a saved slot holds the embeddings it
 * made of each image, which llama-server matches to the next prompt's image by its bytes alone,
 * so another projector would answer from images it never saw. The LoRA adapters and control
 * vectors the flags load are identified as the model is (plan/adapter-files.ts: the flags name only their
 * paths, and an adapter retrained in place changes every K and V). A file whose fingerprint no longer
 * matches is dropped. The model, projector and adapters are identified as they were when llama-server was
 * started, not when the first chat came: a file replaced in between holds other weights than
 * the cache was computed with.
 */
export interface FingerprintParts {
  model: FileIdentity;
  contextPerSlot: number;
  cacheTypeK: string;
  cacheTypeV: string;
  flashAttn: string;
  chatTemplateHash: string | null;
  build: string | null;
  extraArgs: readonly string[];
  /** Absent without one, so a text model's fingerprint is what it was before projectors counted. */
  projector?: FileIdentity;
  /** Absent without any, as `projector`: the adapters and control vectors extraArgs load. */
  adapters?: FileIdentity[];
}

export function fingerprint(parts: FingerprintParts): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 32);
}

/**
 * What a launch was started with beyond its /props: its projector (null: none) and its
 * extra_args, a models entry's after `llama.extra_args` (null: not planned here, the config's).
 */
export interface LaunchArgs {
  projector: string | null;
  extraArgs: readonly string[] | null;
  /** Its files as they were at its start; none: not started here (then as they are now). */
  files?: LaunchFiles | null;
}

/** The fingerprint of the launch llama-server's /props describes, with the config it was planned from. */
export function launchFingerprint(
  props: LlamaProps,
  llama: Config["llama"],
  launch: LaunchArgs = { projector: null, extraArgs: null },
): string | undefined {
  if (props.model_path === null || props.n_ctx === null) return undefined;
  const files = launch.files ?? null;
  // The file it reports loading: one named in extra_args (`-m`, `-hf`) is not the planned file
  // read before the spawn, and is read now, as without a launch.
  const started = files?.model?.path === props.model_path;
  const model = files && started ? files.model : fileIdentity(props.model_path);
  if (!model) return undefined;
  const projector = files
    ? files.projector
    : launch.projector === null
      ? undefined
      : fileIdentity(launch.projector);
  if (launch.projector !== null && !projector) return undefined;
  const args = launch.extraArgs ?? llama.extra_args;
  const known = files ? (files.adapters ?? []) : adapterFiles(args).map((path) => fileIdentity(path));
  const adapters = known.flatMap((a) => a ?? []);
  if (adapters.length < known.length) return undefined;
  return fingerprint({
    model,
    contextPerSlot: props.n_ctx,
    cacheTypeK: llama.cache_type_k,
    cacheTypeV: llama.cache_type_v,
    flashAttn: llama.flash_attn,
    chatTemplateHash: props.chat_template_hash,
    build: props.build_info,
    extraArgs: shownArgs(kvArgs(args)),
    ...(projector ? { projector } : {}),
    ...(adapters.length > 0 ? { adapters } : {}),
  });
}

/**
 * A launch's fingerprint as each save or restore asks it: its /props read once, and none while its
 * model files differ from those it was started with (then nothing is saved or restored until a
 * new launch; said once).
 */
export function launchFingerprinter(
  launch: LaunchView,
  llama: Config["llama"],
  ask: DriveAnswers = drives,
): () => Promise<string | undefined> {
  const once = launch
    .props(AbortSignal.timeout(5000))
    .then((p) => (p ? launchFingerprint(p, llama, launch) : undefined));
  let said = false;
  return async () => {
    const fp = await once;
    if (fp === undefined) return fp;
    // A chat's first: begun with its connection ahead (runtime/launch.ts `takeFilesAhead`).
    const changed = await (launch.takeFilesAhead?.() ?? changedFileNow(launch.files, ask));
    // A drive that does not answer (a dead network mount): not known to be the same, not changed either.
    if (changed === "late") return undefined;
    if (changed === undefined) return fp;
    // Named: an adapter retrained in place is no "model file" to whoever reads the log.
    if (!said)
      logger.warn(
        `${changed} changed since llama-server loaded it: KV state is neither saved nor restored until it starts again`,
      );
    said = true;
    return undefined;
  };
}
