import type { Config } from "../../config/schema.ts";
import type { KvCacheType } from "../ggml-types.ts";
import type { ModelInfo } from "../model.ts";
import type { Decided } from "./decided.ts";

export interface CacheTypes {
  k: KvCacheType;
  v: KvCacheType;
}

export type HeadSizes = Pick<ModelInfo, "head_dim_k" | "head_dim_v">;

/** KV cache types (`--cache-type-k/-v`): `llama.cache_type_k/v`, f16 by default. */
export function decideCacheTypes(
  _heads: HeadSizes,
  llama: Pick<Config["llama"], "cache_type_k" | "cache_type_v">,
): Decided<CacheTypes> {
  const value = { k: llama.cache_type_k, v: llama.cache_type_v };
  const auto = value.k === "f16" && value.v === "f16";
  return {
    value,
    decision: {
      name: "cache_types",
      value: `${value.k}/${value.v}`,
      source: auto ? "auto" : "config",
      flags: ["--cache-type-k", value.k, "--cache-type-v", value.v],
      reason: auto
        ? "f16 keeps full quality; set llama.cache_type_k/v to q8_0 to halve the KV cache"
        : "llama.cache_type_k/v",
    },
  };
}
