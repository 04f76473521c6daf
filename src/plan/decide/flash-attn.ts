import type { Config } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import { flags } from "../argv.ts";
import { isQuantizedCacheType, type KvCacheType } from "../ggml-types.ts";
import type { Decided } from "./decided.ts";

export type FlashAttn = Config["llama"]["flash_attn"];

/**
 * Flash attention (`-fa`): `llama.flash_attn`, forced on by a quantized V cache (llama-server
 * needs it there); `off` with a quantized V cache is `config_invalid`. Takes the V cache type
 * the plan settled on, so it comes after the cache-type decision.
 */
export function decideFlashAttn(requested: FlashAttn, cacheV: KvCacheType): Decided<FlashAttn> {
  const quantV = isQuantizedCacheType(cacheV);
  if (quantV && requested === "off") {
    throw new CoreError(
      "config_invalid",
      `llama.cache_type_v ${cacheV} needs flash attention, but llama.flash_attn is off`,
      { key: "llama.flash_attn" },
    );
  }
  const value: FlashAttn = quantV ? "on" : requested;
  return {
    value,
    decision: {
      name: "flash_attn",
      value,
      source: requested === "auto" && !quantV ? "auto" : "config",
      flags: flags.flashAttn(value),
      reason: quantV
        ? `a ${cacheV} V cache requires flash attention`
        : value === "auto"
          ? "llama-server enables it where the backend supports it (the estimate assumes it does)"
          : `llama.flash_attn: ${value}`,
    },
  };
}
