import { ggmlTypeName } from "./ggml-types.ts";
import type { GgufHeader } from "./gguf-read.ts";

/**
 * The shape of a model as the estimator needs it, derived (purely) from a GGUF header:
 * per-layer weights and attention sizes, sliding-window layers, MLA, experts.
 */

export interface LayerInfo {
  weights_bytes: number;
  /** K and V elements stored per token in this layer's cache (KV heads × head size). */
  k_per_token: number;
  v_per_token: number;
  /** A sliding-window layer keeps only its window (plus a batch) of cells. */
  swa: boolean;
}

export interface ModelInfo {
  path: string;
  files: string[];
  gguf_version: number;
  size_bytes: number;
  architecture: string;
  known_architecture: boolean;
  name: string | null;
  /** The weight type holding most of the bytes (Q4_K, F16…). */
  file_type: string;
  parameters: number;
  n_layer: number;
  n_embd: number;
  n_head: number;
  n_head_kv: number;
  head_dim_k: number;
  head_dim_v: number;
  n_ff: number;
  n_vocab: number;
  context_train: number;
  sliding_window: number | null;
  mla: { kv_lora_rank: number; rope_dim: number } | null;
  experts: { count: number; used: number; ff: number } | null;
  layers: LayerInfo[];
  /** Never offloaded (token embeddings are looked up on the CPU). */
  token_embd_bytes: number;
  /** The output head and its norm; with tied embeddings the head is a copy of token_embd. */
  output_bytes: number;
  output_tied: boolean;
  other_bytes: number;
  weights_bytes: number;
  warnings: string[];
}

/** Architectures whose GGUF keys and attention layout the estimator knows. */
export const KNOWN_ARCHITECTURES = [
  "llama",
  "llama4",
  "mistral3",
  "qwen2",
  "qwen2moe",
  "qwen3",
  "qwen3moe",
  "phi3",
  "phimoe",
  "gemma",
  "gemma2",
  "gemma3",
  "deepseek",
  "deepseek2",
  "granite",
  "olmo2",
  "starcoder2",
  "command-r",
  "cohere2",
  "glm4",
  "gpt-oss",
  "mixtral",
] as const;

/** Every how many layers the pattern repeats; the last layer of each period is global. */
const SWA_PERIOD: Record<string, number> = { gemma2: 2, gemma3: 6, cohere2: 4, "gpt-oss": 2 };

export function modelInfo(h: GgufHeader): ModelInfo {
  const md = h.metadata;
  const warnings: string[] = [];
  const arch = typeof md["general.architecture"] === "string" ? md["general.architecture"] : "unknown";
  const known = (KNOWN_ARCHITECTURES as readonly string[]).includes(arch);
  if (!known) {
    warnings.push(`architecture '${arch}' is not one the planner knows: its estimate is best-effort`);
  }
  const num = (key: string): number | undefined => {
    const v = md[`${arch}.${key}`];
    if (typeof v === "number") return v;
    if (Array.isArray(v) && v.length > 0) return Math.max(...v);
    return undefined;
  };
  const perLayer = (key: string, il: number): number | undefined => {
    const v = md[`${arch}.${key}`];
    if (Array.isArray(v)) return v[il];
    return typeof v === "number" ? v : undefined;
  };

  const layerWeights: number[] = [];
  let tokenEmbd = 0;
  let output = 0;
  let other = 0;
  let hasOutput = false;
  let parameters = 0;
  const bytesByType = new Map<number, number>();
  let tokenEmbdShape: number[] | undefined;
  for (const t of h.tensors) {
    parameters += t.shape.reduce((a, b) => a * b, 1);
    if (t.shape.length >= 2) bytesByType.set(t.type, (bytesByType.get(t.type) ?? 0) + t.bytes);
    const m = /^blk\.(\d+)\./.exec(t.name);
    if (m) {
      const il = Number(m[1]);
      layerWeights[il] = (layerWeights[il] ?? 0) + t.bytes;
    } else if (t.name === "token_embd.weight") {
      tokenEmbd += t.bytes;
      tokenEmbdShape = t.shape;
    } else if (t.name.startsWith("output.") || t.name.startsWith("output_norm.")) {
      output += t.bytes;
      if (t.name === "output.weight") hasOutput = true;
    } else other += t.bytes;
  }
  const tied = !hasOutput && tokenEmbd > 0;
  if (tied) output += tokenEmbd;

  const nLayer = num("block_count") ?? layerWeights.length;
  const nEmbd = num("embedding_length") ?? tokenEmbdShape?.[0] ?? 0;
  const nHead = num("attention.head_count") ?? 1;
  const headK = num("attention.key_length") ?? Math.floor(nEmbd / Math.max(1, nHead));
  const headV = num("attention.value_length") ?? headK;
  const tokens = md["tokenizer.ggml.tokens"];
  const nVocab =
    (tokens && typeof tokens === "object" && "array_length" in tokens ? tokens.array_length : undefined) ??
    num("vocab_size") ??
    tokenEmbdShape?.[1] ??
    0;
  const ctxTrain = num("context_length") ?? 0;
  if (!num("block_count") || !num("embedding_length") || !ctxTrain) {
    warnings.push(`the header lacks some ${arch}.* hyperparameters: they were inferred from the tensors`);
  }

  const loraRank = num("attention.kv_lora_rank");
  const hasMlaKeys = num("attention.key_length_mla") !== undefined;
  const ropeDim = num("rope.dimension_count") ?? 64;
  const mla = loraRank && !hasMlaKeys ? { kv_lora_rank: loraRank, rope_dim: ropeDim } : null;

  const window = num("attention.sliding_window") ?? null;
  const patternRaw = md[`${arch}.attention.sliding_window_pattern`];
  const isSwa = (il: number): boolean => {
    if (!window) return false;
    if (Array.isArray(patternRaw)) return Boolean(patternRaw[il]);
    const period = typeof patternRaw === "number" ? patternRaw : SWA_PERIOD[arch];
    if (!period) return false;
    return il % period < period - 1;
  };

  const layers: LayerInfo[] = [];
  for (let il = 0; il < nLayer; il++) {
    const kvHeads = perLayer("attention.head_count_kv", il) ?? perLayer("attention.head_count", il) ?? nHead;
    const k = mla ? mla.kv_lora_rank + mla.rope_dim : kvHeads * headK;
    const v = mla ? mla.kv_lora_rank : kvHeads * headV;
    layers.push({ weights_bytes: layerWeights[il] ?? 0, k_per_token: k, v_per_token: v, swa: isSwa(il) });
  }

  const expertCount = num("expert_count");
  const experts = expertCount
    ? {
        count: expertCount,
        used: num("expert_used_count") ?? 1,
        ff: num("expert_feed_forward_length") ?? num("feed_forward_length") ?? 0,
      }
    : null;

  let fileType = "unknown";
  let most = -1;
  for (const [type, bytes] of bytesByType) {
    if (bytes > most) {
      most = bytes;
      fileType = ggmlTypeName(type);
    }
  }
  const weightsBytes =
    layerWeights.reduce((a, b) => a + (b ?? 0), 0) + tokenEmbd + (tied ? output - tokenEmbd : output) + other;

  return {
    path: h.path,
    files: h.files,
    gguf_version: h.version,
    size_bytes: h.size_bytes,
    architecture: arch,
    known_architecture: known,
    name: typeof md["general.name"] === "string" ? md["general.name"] : null,
    file_type: fileType,
    parameters,
    n_layer: nLayer,
    n_embd: nEmbd,
    n_head: nHead,
    n_head_kv: num("attention.head_count_kv") ?? nHead,
    head_dim_k: headK,
    head_dim_v: headV,
    n_ff: num("feed_forward_length") ?? 4 * nEmbd,
    n_vocab: nVocab,
    context_train: ctxTrain || 4096,
    sliding_window: window,
    mla,
    experts,
    layers,
    token_embd_bytes: tokenEmbd,
    output_bytes: output,
    output_tied: tied,
    other_bytes: other,
    weights_bytes: weightsBytes,
    warnings,
  };
}
