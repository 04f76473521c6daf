import { describe, expect, test } from "bun:test";
import { layerAttention, mlaOf, slidingLayers } from "../../src/plan/model-attention.ts";
import { hyperparams } from "../../src/plan/model-metadata.ts";

const HEAD = { n_head: 8, head_dim_k: 128, head_dim_v: 64 };

describe("model attention", () => {
  test("MLA from the KV LoRA rank (rope 64 by default), unless the header has key_length_mla", () => {
    const ds = (extra: Record<string, number>) =>
      mlaOf(hyperparams({ "deepseek2.attention.kv_lora_rank": 512, ...extra }, "deepseek2"));
    expect(ds({})).toEqual({ kv_lora_rank: 512, rope_dim: 64 });
    expect(ds({ "deepseek2.rope.dimension_count": 32 })).toEqual({ kv_lora_rank: 512, rope_dim: 32 });
    expect(ds({ "deepseek2.attention.key_length_mla": 192 })).toBeNull();
    expect(mlaOf(hyperparams({}, "llama"))).toBeNull();
  });

  test("sliding layers: the header's array, its period, the architecture's period; none without a window", () => {
    const layers = (md: Record<string, number | number[]>, arch: string, window: number | null) => {
      const swa = slidingLayers(hyperparams(md, arch), window);
      return Array.from({ length: 6 }, (_, il) => swa(il));
    };
    expect(layers({ "x.attention.sliding_window_pattern": [1, 0, 0, 1, 0, 0] }, "x", 512)).toEqual([
      true,
      false,
      false,
      true,
      false,
      false,
    ]);
    expect(layers({ "x.attention.sliding_window_pattern": 3 }, "x", 512)).toEqual([
      true,
      true,
      false,
      true,
      true,
      false,
    ]);
    expect(layers({}, "gemma2", 4096)).toEqual([true, false, true, false, true, false]);
    expect(layers({}, "llama", 4096)).toEqual([false, false, false, false, false, false]);
    expect(layers({}, "gemma2", null)).toEqual([false, false, false, false, false, false]);
  });

  test("per-layer KV heads × head sizes, or MLA's latent", () => {
    const hp = hyperparams({ "q.attention.head_count_kv": [2, 4] }, "q");
    expect(layerAttention(hp, 2, HEAD, null, () => false)).toEqual([
      { k_per_token: 256, v_per_token: 128, swa: false },
      { k_per_token: 512, v_per_token: 256, swa: false },
    ]);
    // No KV head count: every head has its own K and V.
    const mha = layerAttention(hyperparams({}, "q"), 1, HEAD, null, () => true);
    expect(mha).toEqual([{ k_per_token: 1024, v_per_token: 512, swa: true }]);
    const mla = layerAttention(hp, 1, HEAD, { kv_lora_rank: 512, rope_dim: 64 }, () => false);
    expect(mla).toEqual([{ k_per_token: 576, v_per_token: 512, swa: false }]);
  });
});
