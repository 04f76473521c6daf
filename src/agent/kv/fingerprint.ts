import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import type { Config } from "../../config/schema.ts";
import type { LlamaProps } from "../../llama/props.ts";

/**
 * What a saved slot is valid for. The file names no model: a model of the same shape restores
 * another's file without complaint and would answer from a KV cache it never computed
 * (test/fixtures/llama-server/transcripts/93d). So each file is keyed by a fingerprint of
 * everything that shapes the cache: the model file (its path, size, modification time and inode: a
 * file replaced in place is another model), the context per slot, the KV cache types and flash
 * attention (the V layout), the chat template (the same words render to other tokens under another
 * one), llama-server's build (its file format), and the flags passed through as they are (a models
 * entry's too: `--rope-freq-base` or a `--lora` there changes what every cached K holds); and the
 * vision projector (`--mmproj`), identified as the model is: a saved slot holds the embeddings it
 * made of each image, which llama-server matches to the next prompt's image by its bytes alone,
 * so another projector would answer from images it never saw. A file whose fingerprint no longer
 * matches is dropped.
 */
export interface FingerprintParts {
  model: ModelIdentity;
  contextPerSlot: number;
  cacheTypeK: string;
  cacheTypeV: string;
  flashAttn: string;
  chatTemplateHash: string | null;
  build: string | null;
  extraArgs: readonly string[];
  /** Absent without one, so a text model's fingerprint is what it was before projectors counted. */
  projector?: ModelIdentity;
}

export interface ModelIdentity {
  path: string;
  size: number;
  mtimeMs: number;
  ino: number;
}

export function fingerprint(parts: FingerprintParts): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex").slice(0, 32);
}

/** The model file as it is now; undefined when it cannot be read (nothing is saved then). */
export function modelIdentity(path: string): ModelIdentity | undefined {
  try {
    const st = statSync(path);
    return { path, size: st.size, mtimeMs: Math.floor(st.mtimeMs), ino: st.ino };
  } catch {
    return undefined;
  }
}

/**
 * What a launch was started with beyond its /props: its projector (null: none) and its
 * extra_args, a models entry's after `llama.extra_args` (null: not planned here, the config's).
 */
export interface LaunchArgs {
  projector: string | null;
  extraArgs: readonly string[] | null;
}

/** The fingerprint of the launch llama-server's /props describes, with the config it was planned from. */
export function launchFingerprint(
  props: LlamaProps,
  llama: Config["llama"],
  launch: LaunchArgs = { projector: null, extraArgs: null },
): string | undefined {
  if (props.model_path === null || props.n_ctx === null) return undefined;
  const model = modelIdentity(props.model_path);
  if (!model) return undefined;
  const projector = launch.projector === null ? undefined : modelIdentity(launch.projector);
  if (launch.projector !== null && !projector) return undefined;
  return fingerprint({
    model,
    contextPerSlot: props.n_ctx,
    cacheTypeK: llama.cache_type_k,
    cacheTypeV: llama.cache_type_v,
    flashAttn: llama.flash_attn,
    chatTemplateHash: props.chat_template_hash,
    build: props.build_info,
    extraArgs: launch.extraArgs ?? llama.extra_args,
    ...(projector ? { projector } : {}),
  });
}
