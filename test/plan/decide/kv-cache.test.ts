import { describe, expect, test } from "bun:test";
import {
  type CacheRequest,
  cacheRequests,
  cacheTypesFor,
  decideCacheTypes,
} from "../../../src/plan/decide/kv-cache.ts";
import type { KvCacheType } from "../../../src/plan/ggml-types.ts";
import { coreErrorOf } from "../../fixtures/core-error.ts";

const HEAD_128 = { head_dim_k: 128, head_dim_v: 128 };
const HEAD_16 = { head_dim_k: 16, head_dim_v: 16 };
const auto = (type: KvCacheType): CacheRequest => ({ type, source: "auto" });
const forced = (type: KvCacheType): CacheRequest => ({ type, source: "config" });

describe("cacheRequests", () => {
  test("f16 (the schema's default) is the planner's own choice; anything else was written by the user", () => {
    expect(cacheRequests({ cache_type_k: "f16", cache_type_v: "f16" })).toEqual({
      k: auto("f16"),
      v: auto("f16"),
    });
    expect(cacheRequests({ cache_type_k: "q8_0", cache_type_v: "bf16" })).toEqual({
      k: forced("q8_0"),
      v: forced("bf16"),
    });
  });
});

describe("cacheTypesFor", () => {
  test("the types whose block divides a head size", () => {
    expect(cacheTypesFor(128)).toEqual([
      "f32",
      "f16",
      "bf16",
      "q8_0",
      "q4_0",
      "q4_1",
      "iq4_nl",
      "q5_0",
      "q5_1",
    ]);
    expect(cacheTypesFor(80)).toEqual(["f32", "f16", "bf16"]);
    expect(cacheTypesFor(16)).toEqual(["f32", "f16", "bf16"]);
  });
});

describe("decideCacheTypes", () => {
  test("f16 by default, with a hint at halving the cache where q8_0 would be accepted", () => {
    const d = decideCacheTypes(HEAD_128, { k: auto("f16"), v: auto("f16") });
    expect(d.value).toEqual({ k: "f16", v: "f16" });
    expect(d.decision).toEqual({
      name: "cache_types",
      value: "f16/f16",
      source: "auto",
      flags: ["--cache-type-k", "f16", "--cache-type-v", "f16"],
      reason: "f16 keeps full quality; set llama.cache_type_k/v to q8_0 to halve the KV cache",
    });
  });

  test("no q8_0 hint for a model whose heads rule it out", () => {
    const d = decideCacheTypes({ head_dim_k: 128, head_dim_v: 80 }, { k: auto("f16"), v: auto("f16") });
    expect(d.decision.reason).toBe(
      "f16 keeps full quality; this model's head sizes (K 128, V 80) rule out quantized types (q8_0 stores blocks of 32)",
    );
  });

  test("forced types that fit are used as given", () => {
    const d = decideCacheTypes(HEAD_128, { k: forced("q8_0"), v: forced("q4_0") });
    expect(d.value).toEqual({ k: "q8_0", v: "q4_0" });
    expect(d.decision).toMatchObject({
      value: "q8_0/q4_0",
      source: "config",
      reason: "llama.cache_type_k/v",
    });
    expect(d.decision.flags).toEqual(["--cache-type-k", "q8_0", "--cache-type-v", "q4_0"]);
  });

  test("float types fit any head size", () => {
    const d = decideCacheTypes({ head_dim_k: 7, head_dim_v: 3 }, { k: forced("f32"), v: forced("bf16") });
    expect(d.value).toEqual({ k: "f32", v: "bf16" });
  });

  test("a forced type whose block does not divide the head size is model_plan_error naming the key", () => {
    const e = coreErrorOf(() => decideCacheTypes(HEAD_16, { k: forced("q8_0"), v: auto("f16") }));
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toBe(
      "llama.cache_type_k q8_0 cannot be used with this model: q8_0 stores blocks of 32 and the model's " +
        "K head size (n_embd_head_k) is 16, which llama-server refuses; " +
        "set llama.cache_type_k to one whose block divides 16: f32, f16, bf16",
    );
    expect(e.data).toEqual({ key: "llama.cache_type_k", cache_type: "q8_0", block_size: 32, head_size: 16 });
  });

  test("K and V are checked against their own head sizes, K first as llama-server does", () => {
    const heads = { head_dim_k: 192, head_dim_v: 80 };
    expect(decideCacheTypes(heads, { k: forced("q8_0"), v: auto("f16") }).value.k).toBe("q8_0");
    const v = coreErrorOf(() => decideCacheTypes(heads, { k: forced("q8_0"), v: forced("q5_0") }));
    expect(v.data).toMatchObject({ key: "llama.cache_type_v", head_size: 80 });
    expect(v.message).toContain("V head size (n_embd_head_v) is 80");
    const both = coreErrorOf(() => decideCacheTypes(HEAD_16, { k: forced("q4_1"), v: forced("q4_1") }));
    expect(both.data?.key).toBe("llama.cache_type_k");
  });

  test("a type the planner chose that does not fit falls back to f16, saying why", () => {
    const d = decideCacheTypes(HEAD_16, { k: auto("q8_0"), v: auto("q8_0") });
    expect(d.value).toEqual({ k: "f16", v: "f16" });
    expect(d.decision.source).toBe("auto");
    expect(d.decision.flags).toEqual(["--cache-type-k", "f16", "--cache-type-v", "f16"]);
    expect(d.decision.reason).toContain(
      "the K cache falls back to f16: q8_0 stores blocks of 32 and the model's K head size (n_embd_head_k) is 16",
    );
    expect(d.decision.reason).toContain("the V cache falls back to f16");
  });

  test("a type the planner chose that fits is kept", () => {
    const d = decideCacheTypes(HEAD_128, { k: auto("q8_0"), v: auto("f16") });
    expect(d.value).toEqual({ k: "q8_0", v: "f16" });
    expect(d.decision.reason).toBe("q8_0/f16");
  });
});
