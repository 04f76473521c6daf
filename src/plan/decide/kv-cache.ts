import type { Config } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import { flags } from "../argv.ts";
import { cacheTypeBlock, KV_CACHE_TYPE_NAMES, type KvCacheType } from "../ggml-types.ts";
import type { ModelInfo } from "../model.ts";
import type { Decided } from "./decided.ts";

/** Full quality, and its block (1) divides every head size: the planner's own choice. */
const DEFAULT_CACHE_TYPE: KvCacheType = "f16";

/** A cache type asked for, and whether the user forced it (`config`) or the planner chose it. */
export interface CacheRequest {
  type: KvCacheType;
  source: "auto" | "config";
}

export interface CacheTypes {
  k: KvCacheType;
  v: KvCacheType;
}

export type HeadSizes = Pick<ModelInfo, "head_dim_k" | "head_dim_v">;

/**
 * What the config asks for. `llama.cache_type_k/v` default to f16 and cannot say "auto", so an
 * absent key and `f16` parse alike; any other value was written by the user and is forced.
 * (A written f16 is the default's plan anyway, and always allowed.)
 */
export function cacheRequests(llama: Pick<Config["llama"], "cache_type_k" | "cache_type_v">): {
  k: CacheRequest;
  v: CacheRequest;
} {
  const request = (type: KvCacheType): CacheRequest => ({
    type,
    source: type === DEFAULT_CACHE_TYPE ? "auto" : "config",
  });
  return { k: request(llama.cache_type_k), v: request(llama.cache_type_v) };
}

/** The cache types whose block divides a head size (llama-server accepts only those). */
export function cacheTypesFor(headSize: number): KvCacheType[] {
  return KV_CACHE_TYPE_NAMES.filter((t) => headSize % cacheTypeBlock(t) === 0);
}

const SIDES = {
  k: { key: "llama.cache_type_k", label: "K", head: "head_dim_k", gguf: "n_embd_head_k" },
  v: { key: "llama.cache_type_v", label: "V", head: "head_dim_v", gguf: "n_embd_head_v" },
} as const;

/**
 * One side's type: kept when its block divides the head size; otherwise model_plan_error if the
 * user forced it (naming the key, the head size and what would work), else f16 and why.
 */
function settle(side: "k" | "v", req: CacheRequest, heads: HeadSizes): { type: KvCacheType; note?: string } {
  const s = SIDES[side];
  const head = heads[s.head];
  const block = cacheTypeBlock(req.type);
  if (head % block === 0) return { type: req.type };
  const refused = `${req.type} stores blocks of ${block} and the model's ${s.label} head size (${s.gguf}) is ${head}`;
  if (req.source === "config") {
    throw new CoreError(
      "model_plan_error",
      `${s.key} ${req.type} cannot be used with this model: ${refused}, which llama-server refuses; ` +
        `set ${s.key} to one whose block divides ${head}: ${cacheTypesFor(head).join(", ")}`,
      { key: s.key, cache_type: req.type, block_size: block, head_size: head },
    );
  }
  return { type: DEFAULT_CACHE_TYPE, note: `the ${s.label} cache falls back to f16: ${refused}` };
}

/**
 * KV cache types (`--cache-type-k/-v`) llama-server will accept: each type's block must divide
 * the head size it stores, K's for the K cache and V's for the V cache. K is settled first, as
 * llama-server checks it first.
 */
export function decideCacheTypes(
  heads: HeadSizes,
  req: { k: CacheRequest; v: CacheRequest },
): Decided<CacheTypes> {
  const k = settle("k", req.k, heads);
  const v = settle("v", req.v, heads);
  const value = { k: k.type, v: v.type };
  const source = req.k.source === "auto" && req.v.source === "auto" ? "auto" : "config";
  const notes = [k.note, v.note].filter((n): n is string => n !== undefined);
  const reason = source === "config" ? "llama.cache_type_k/v" : autoReason(heads, value);
  return {
    value,
    decision: {
      name: "cache_types",
      value: `${value.k}/${value.v}`,
      source,
      flags: flags.cacheTypes(value.k, value.v),
      reason: [reason, ...notes].join("; "),
    },
  };
}

function autoReason(heads: HeadSizes, types: CacheTypes): string {
  if (types.k !== DEFAULT_CACHE_TYPE || types.v !== DEFAULT_CACHE_TYPE) return `${types.k}/${types.v}`;
  // Only suggest q8_0 where llama-server would take it.
  const q8 =
    cacheTypesFor(heads.head_dim_k).includes("q8_0") && cacheTypesFor(heads.head_dim_v).includes("q8_0");
  return q8
    ? "f16 keeps full quality; set llama.cache_type_k/v to q8_0 to halve the KV cache"
    : `f16 keeps full quality; this model's head sizes (K ${heads.head_dim_k}, V ${heads.head_dim_v}) rule out quantized types (q8_0 stores blocks of ${cacheTypeBlock("q8_0")})`;
}
