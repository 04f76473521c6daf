import { describe, expect, test } from "bun:test";
import { decideCacheTypes } from "../../../src/plan/decide/kv-cache.ts";

const HEAD_128 = { head_dim_k: 128, head_dim_v: 128 };

describe("decideCacheTypes", () => {
  test("f16 by default, with a hint at halving the cache", () => {
    const d = decideCacheTypes(HEAD_128, { cache_type_k: "f16", cache_type_v: "f16" });
    expect(d.value).toEqual({ k: "f16", v: "f16" });
    expect(d.decision).toEqual({
      name: "cache_types",
      value: "f16/f16",
      source: "auto",
      flags: ["--cache-type-k", "f16", "--cache-type-v", "f16"],
      reason: "f16 keeps full quality; set llama.cache_type_k/v to q8_0 to halve the KV cache",
    });
  });

  test("configured types are used as given", () => {
    const d = decideCacheTypes(HEAD_128, { cache_type_k: "q8_0", cache_type_v: "q4_0" });
    expect(d.value).toEqual({ k: "q8_0", v: "q4_0" });
    expect(d.decision).toMatchObject({
      value: "q8_0/q4_0",
      source: "config",
      reason: "llama.cache_type_k/v",
    });
  });
});
