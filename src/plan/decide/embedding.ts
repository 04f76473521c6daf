import type { EMBEDDING_POOLINGS } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";
import { computeBytes, kvCacheBytes } from "../estimate.ts";
import type { ModelInfo } from "../model.ts";

/**
 * How an embedding model runs (docs/plan.md, "Embedding models"): `--embeddings` with the
 * pooling its GGUF declares, one input per batch (`-b` = `-ub`: llama-server forces it and
 * refuses a longer input, never truncating it: recordings 114, 119), no KV quantization and no
 * RAM prompt cache, and memory of weights and a compute buffer. An encoder (BERT) keeps no KV
 * cache at all (119); a decoder used as an embedder (96) keeps one for its batch.
 * Pure: the model's header in (its pooling type and causality read with it, model.ts), the flags
 * and the bytes out.
 */

/** llama.cpp's `llama_pooling_type`, in the order `<arch>.pooling_type` numbers it. */
const POOLING = ["none", "mean", "cls", "last", "rank"] as const;
export type Pooling = (typeof POOLING)[number];

/** llama-server's `-np` when it is left to choose (119: "n_parallel is set to auto, using 4"). */
const AUTO_SLOTS = 4;

export interface EmbeddingInput {
  model: ModelInfo;
  /** Requests embedded at once; absent: llama-server's own 4. */
  slots?: number;
  /** The longest input wanted, in tokens; absent or more: the model's positions. */
  maxInputTokens?: number;
}

export interface EmbeddingMemory {
  weights: number;
  /** 0 for an encoder; a decoder's cache for one batch per slot. */
  kv_cache: number;
  compute: number;
  /** The pooled vectors handed back (one per slot; every token's with pooling none). */
  output: number;
  total: number;
}

/** The poolings chosen: the ones `/v1/embeddings` answers with (the plan report's). */
type Chosen = (typeof EMBEDDING_POOLINGS)[number];

export interface EmbeddingLaunch {
  pooling: Chosen;
  /** Tokens of the longest input: `-b`, `-ub` and each slot's context. */
  batch: number;
  slots: number;
  /** Whether the model attends causally (a decoder): only then is there a KV cache. */
  causal: boolean;
  /** The flags this decides, in llama-server's spelling (the launcher adds -m, -ngl, host and port). */
  flags: string[];
  memory: EmbeddingMemory;
  /** Why, one line per choice, for the plan's report. */
  reasons: string[];
}

export function decideEmbedding(input: EmbeddingInput): EmbeddingLaunch {
  const { model } = input;
  const pooling = choosePooling(model.pooling_type ?? undefined);
  const causal = !isEncoder(model);
  const batch = Math.max(1, Math.min(input.maxInputTokens ?? model.context_train, model.context_train));
  const slots = Math.max(1, input.slots ?? AUTO_SLOTS);
  const memory = embeddingMemory(model, { batch, slots, causal, pooling: pooling.value });
  return {
    pooling: pooling.value,
    batch,
    slots,
    causal,
    flags: [
      ...flags.embeddings(pooling.value),
      ...flags.slots(slots),
      ...flags.context(batch, slots),
      ...flags.batch(batch),
      ...flags.cacheRam(0),
    ],
    memory,
    reasons: [
      pooling.reason,
      `inputs of up to ${batch} tokens, each in one batch (-b = -ub ${batch}): llama-server refuses a longer one rather than cut it`,
      causal
        ? "a decoder used for embeddings keeps a KV cache for its batch, unquantized"
        : "an encoder keeps no KV cache: weights and a compute buffer only",
      "no RAM prompt cache (--cache-ram 0): an embedding is not a conversation that comes back",
    ],
  };
}

/**
 * Whether the model attends both ways, as llama.cpp builds the BERT family (bert, nomic-bert,
 * jina-bert-v2, modern-bert…) and T5's encoder, or as its header says (119: `bert.attention.causal` false).
 */
function isEncoder(model: ModelInfo): boolean {
  const arch = model.architecture;
  return model.attention_causal === false || arch.includes("bert") || arch === "t5encoder";
}

function choosePooling(declared: number | undefined): { value: Chosen; reason: string } {
  const named = declared === undefined ? undefined : POOLING[declared];
  if (named === "mean" || named === "cls" || named === "last")
    return { value: named, reason: `pooling ${named}, as the GGUF declares` };
  if (named === "rank")
    return {
      value: "mean",
      reason: "the GGUF is a reranker (pooling rank), whose embeddings are zeros: pooling mean instead",
    };
  // /v1/embeddings refuses pooling none (recording 117); a decoder declares nothing (96).
  return { value: "mean", reason: "pooling mean: the GGUF declares none that /v1/embeddings takes" };
}

interface Shape {
  batch: number;
  slots: number;
  causal: boolean;
  pooling: Pooling;
}

/**
 * The bytes llama-server allocates (119: "model buffer size", no `llama_kv_cache` line for an
 * encoder, "compute buffer size"). An encoder's graph holds, for one micro-batch, the widest
 * activations (the FFN's up projection beside Q, K and V) and the attention mask over the batch
 * (F16, flash attention being llama-server's `auto` choice where the backend has it).
 */
export function embeddingMemory(model: ModelInfo, s: Shape): EmbeddingMemory {
  const kv = s.causal ? kvCacheBytes(model, s.batch, s.slots) : 0;
  const compute = s.causal
    ? computeBytes(model, s.batch, true, s.batch)
    : s.batch * 4 * (model.n_ff + 3 * model.n_embd) + s.batch * s.batch * 2;
  const vectors = s.pooling === "none" ? s.batch * s.slots : s.slots;
  const output = vectors * model.n_embd * 4;
  const weights = model.weights_bytes;
  return { weights, kv_cache: kv, compute, output, total: weights + kv + compute + output };
}
