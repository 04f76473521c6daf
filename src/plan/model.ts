import type { GgufHeader } from "./gguf-read.ts";
import { layerAttention, type Mla, mlaOf, slidingLayers } from "./model-attention.ts";
import { architectureOf, type Hyperparams, hyperparams, type Metadata } from "./model-metadata.ts";
import { type TensorTally, tallyTensors } from "./model-tensors.ts";

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
  mla: Mla | null;
  experts: { count: number; used: number; ff: number } | null;
  layers: LayerInfo[];
  /** Never offloaded (token embeddings are looked up on the CPU). */
  token_embd_bytes: number;
  /** The output head and its norm; with tied embeddings the head is a copy of token_embd. */
  output_bytes: number;
  output_tied: boolean;
  other_bytes: number;
  weights_bytes: number;
  /** `tokenizer.chat_template`: the model's own chat template (whether it thinks shows in the plan). */
  chat_template?: string | null;
  /**
   * `<arch>.pooling_type` and `<arch>.attention.causal`: what an embedding model's plan reads
   * (decide/embedding.ts; recording 119); null where the header has none.
   */
  pooling_type?: number | null;
  attention_causal?: boolean | null;
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

/** The model's size hyperparameters, inferred from the tensors where the header lacks them. */
function dimensions(hp: Hyperparams, md: Metadata, tally: TensorTally) {
  const nLayer = hp.num("block_count") ?? tally.layer_bytes.length;
  const nEmbd = hp.num("embedding_length") ?? tally.token_embd_shape?.[0] ?? 0;
  const nHead = hp.num("attention.head_count") ?? 1;
  const headK = hp.num("attention.key_length") ?? Math.floor(nEmbd / Math.max(1, nHead));
  const tokens = md["tokenizer.ggml.tokens"];
  const listed =
    tokens && typeof tokens === "object" && "array_length" in tokens ? tokens.array_length : undefined;
  const ctxTrain = hp.num("context_length") ?? 0;
  const inferred = !hp.num("block_count") || !hp.num("embedding_length") || !ctxTrain;
  return {
    n_layer: nLayer,
    n_embd: nEmbd,
    n_head: nHead,
    n_head_kv: hp.num("attention.head_count_kv") ?? nHead,
    head_dim_k: headK,
    head_dim_v: hp.num("attention.value_length") ?? headK,
    n_ff: hp.num("feed_forward_length") ?? 4 * nEmbd,
    n_vocab: listed ?? hp.num("vocab_size") ?? tally.token_embd_shape?.[1] ?? 0,
    // llama.cpp's own default when the header has none.
    context_train: ctxTrain || 4096,
    warnings: inferred
      ? [`the header lacks some ${hp.arch}.* hyperparameters: they were inferred from the tensors`]
      : [],
  };
}

function expertsOf(hp: Hyperparams): ModelInfo["experts"] {
  const count = hp.num("expert_count");
  if (!count) return null;
  return {
    count,
    used: hp.num("expert_used_count") ?? 1,
    ff: hp.num("expert_feed_forward_length") ?? hp.num("feed_forward_length") ?? 0,
  };
}

export function modelInfo(h: GgufHeader): ModelInfo {
  const md = h.metadata;
  const arch = architectureOf(md);
  const known = (KNOWN_ARCHITECTURES as readonly string[]).includes(arch);
  const hp = hyperparams(md, arch);
  const tally = tallyTensors(h.tensors);
  const { warnings: inferred, ...dims } = dimensions(hp, md, tally);
  const mla = mlaOf(hp);
  const window = hp.num("attention.sliding_window") ?? null;
  const attention = layerAttention(hp, dims.n_layer, dims, mla, slidingLayers(hp, window));
  const warnings = [
    ...(known ? [] : [`architecture '${arch}' is not one the planner knows: its estimate is best-effort`]),
    ...inferred,
  ];
  return {
    path: h.path,
    files: h.files,
    gguf_version: h.version,
    size_bytes: h.size_bytes,
    architecture: arch,
    known_architecture: known,
    name: typeof md["general.name"] === "string" ? md["general.name"] : null,
    file_type: tally.file_type,
    parameters: tally.parameters,
    n_layer: dims.n_layer,
    n_embd: dims.n_embd,
    n_head: dims.n_head,
    n_head_kv: dims.n_head_kv,
    head_dim_k: dims.head_dim_k,
    head_dim_v: dims.head_dim_v,
    n_ff: dims.n_ff,
    n_vocab: dims.n_vocab,
    context_train: dims.context_train,
    sliding_window: window,
    mla,
    experts: expertsOf(hp),
    layers: attention.map((a, il) => ({ weights_bytes: tally.layer_bytes[il] ?? 0, ...a })),
    token_embd_bytes: tally.token_embd_bytes,
    output_bytes: tally.output_bytes,
    output_tied: tally.output_tied,
    other_bytes: tally.other_bytes,
    weights_bytes: tally.weights_bytes,
    chat_template: typeof md["tokenizer.chat_template"] === "string" ? md["tokenizer.chat_template"] : null,
    pooling_type: hp.num("pooling_type") ?? null,
    attention_causal:
      typeof hp.raw("attention.causal") === "boolean" ? (hp.raw("attention.causal") as boolean) : null,
    warnings,
  };
}

/**
 * Why llama-server cannot load this GGUF as its model, or null. A multimodal projector
 * (`general.architecture` clip) is one whatever the file is called (second-state's
 * `llava-v1.5-7b-mmproj-model-f16.gguf`): llama-server refuses it as `-m`, "CLIP cannot be used
 * as main model, use it with --mmproj instead" (docs/models.md "The projector").
 */
export function notAModel(model: Pick<ModelInfo, "path" | "architecture">): string | null {
  if (model.architecture !== "clip") return null;
  return `${model.path} is a multimodal projector (general.architecture clip), not a model: llama-server loads it only beside one, as --mmproj`;
}
