import type { Hyperparams } from "./model-metadata.ts";

/**
 * The attention layout the KV cache follows: per-layer KV heads (grouped-query attention),
 * DeepSeek's MLA (a compressed latent instead of per-head K and V), sliding-window layers.
 */

/** K and V elements per token and whether the layer only keeps a window. */
export interface LayerAttention {
  k_per_token: number;
  v_per_token: number;
  swa: boolean;
}

export interface Mla {
  kv_lora_rank: number;
  rope_dim: number;
}

/**
 * MLA when the header has a KV LoRA rank; a header that also states `key_length_mla` was
 * converted with the cache already expanded per head, so it is treated as ordinary attention.
 */
export function mlaOf(hp: Hyperparams): Mla | null {
  const loraRank = hp.num("attention.kv_lora_rank");
  const hasMlaKeys = hp.num("attention.key_length_mla") !== undefined;
  const ropeDim = hp.num("rope.dimension_count") ?? 64;
  return loraRank && !hasMlaKeys ? { kv_lora_rank: loraRank, rope_dim: ropeDim } : null;
}

/** Every how many layers the pattern repeats; the last layer of each period is global. */
const SWA_PERIOD: Record<string, number> = { gemma2: 2, gemma3: 6, cohere2: 4, "gpt-oss": 2 };

/**
 * Which layers slide: the header's per-layer pattern, else its period, else the architecture's
 * known period. No window: none.
 */
export function slidingLayers(hp: Hyperparams, window: number | null): (il: number) => boolean {
  const pattern = hp.raw("attention.sliding_window_pattern");
  return (il) => {
    if (!window) return false;
    if (Array.isArray(pattern)) return Boolean(pattern[il]);
    const period = typeof pattern === "number" ? pattern : SWA_PERIOD[hp.arch];
    if (!period) return false;
    return il % period < period - 1;
  };
}

/** Each layer's cache shape: KV heads × head size for K and V, or MLA's latent. */
export function layerAttention(
  hp: Hyperparams,
  nLayer: number,
  head: { n_head: number; head_dim_k: number; head_dim_v: number },
  mla: Mla | null,
  isSwa: (il: number) => boolean,
): LayerAttention[] {
  const layers: LayerAttention[] = [];
  for (let il = 0; il < nLayer; il++) {
    const kvHeads =
      hp.perLayer("attention.head_count_kv", il) ?? hp.perLayer("attention.head_count", il) ?? head.n_head;
    layers.push({
      k_per_token: mla ? mla.kv_lora_rank + mla.rope_dim : kvHeads * head.head_dim_k,
      v_per_token: mla ? mla.kv_lora_rank : kvHeads * head.head_dim_v,
      swa: isSwa(il),
    });
  }
  return layers;
}
