/**
 * Storage of each ggml tensor type: elements per block and bytes per block (facts from
 * ggml's type traits). Tensor byte sizes are computed from these, never from file offsets.
 */
const TYPES: Record<number, { name: string; block: number; bytes: number }> = {
  0: { name: "F32", block: 1, bytes: 4 },
  1: { name: "F16", block: 1, bytes: 2 },
  2: { name: "Q4_0", block: 32, bytes: 18 },
  3: { name: "Q4_1", block: 32, bytes: 20 },
  6: { name: "Q5_0", block: 32, bytes: 22 },
  7: { name: "Q5_1", block: 32, bytes: 24 },
  8: { name: "Q8_0", block: 32, bytes: 34 },
  9: { name: "Q8_1", block: 32, bytes: 36 }, // two halves (d, s) and 32 quants, not two floats
  10: { name: "Q2_K", block: 256, bytes: 84 },
  11: { name: "Q3_K", block: 256, bytes: 110 },
  12: { name: "Q4_K", block: 256, bytes: 144 },
  13: { name: "Q5_K", block: 256, bytes: 176 },
  14: { name: "Q6_K", block: 256, bytes: 210 },
  15: { name: "Q8_K", block: 256, bytes: 292 },
  16: { name: "IQ2_XXS", block: 256, bytes: 66 },
  17: { name: "IQ2_XS", block: 256, bytes: 74 },
  18: { name: "IQ3_XXS", block: 256, bytes: 98 },
  19: { name: "IQ1_S", block: 256, bytes: 50 },
  20: { name: "IQ4_NL", block: 32, bytes: 18 },
  21: { name: "IQ3_S", block: 256, bytes: 110 },
  22: { name: "IQ2_S", block: 256, bytes: 82 },
  23: { name: "IQ4_XS", block: 256, bytes: 136 },
  24: { name: "I8", block: 1, bytes: 1 },
  25: { name: "I16", block: 1, bytes: 2 },
  26: { name: "I32", block: 1, bytes: 4 },
  27: { name: "I64", block: 1, bytes: 8 },
  28: { name: "F64", block: 1, bytes: 8 },
  29: { name: "IQ1_M", block: 256, bytes: 56 },
  30: { name: "BF16", block: 1, bytes: 2 },
  34: { name: "TQ1_0", block: 256, bytes: 54 },
  35: { name: "TQ2_0", block: 256, bytes: 66 },
  39: { name: "MXFP4", block: 32, bytes: 17 },
  // Newer than the rest, all in llama.cpp b10587 (GGML_TYPE_COUNT 43): a type missing here was
  // counted as F32, and a real NVFP4 or Q1_0 model's file was called truncated.
  40: { name: "NVFP4", block: 64, bytes: 36 },
  41: { name: "Q1_0", block: 128, bytes: 18 },
  42: { name: "Q2_0", block: 64, bytes: 18 },
};

export function ggmlTypeName(type: number): string {
  return TYPES[type]?.name ?? `type${type}`;
}

/** Elements per block of a type ggml has, or undefined for one this table lacks. */
export function ggmlBlockSize(type: number): number | undefined {
  return TYPES[type]?.block;
}

/**
 * Bytes of a tensor of `elements` elements of `type`. A type ggml lacks has no size: the reader
 * refuses it first (gguf-read.ts), as llama.cpp does, where counting it as F32 mis-planned.
 */
export function tensorBytes(type: number, elements: number): number {
  const t = TYPES[type];
  if (!t) throw new RangeError(`ggml has no type ${type}`);
  return Math.ceil(elements / t.block) * t.bytes;
}

/**
 * The KV cache types llama-server accepts (`--cache-type-k/-v`), with ggml's block: a quantized
 * type stores `block` elements in `bytes` bytes, and llama-server refuses one whose block does
 * not divide the model's head size (`K cache type q8_0 with block size 32 does not divide
 * n_embd_head_k=16`).
 */
export const KV_CACHE_TYPES = {
  f32: { block: 1, bytes: 4 },
  f16: { block: 1, bytes: 2 },
  bf16: { block: 1, bytes: 2 },
  q8_0: { block: 32, bytes: 34 },
  q4_0: { block: 32, bytes: 18 },
  q4_1: { block: 32, bytes: 20 },
  iq4_nl: { block: 32, bytes: 18 },
  q5_0: { block: 32, bytes: 22 },
  q5_1: { block: 32, bytes: 24 },
} as const;
export type KvCacheType = keyof typeof KV_CACHE_TYPES;
export const KV_CACHE_TYPE_NAMES = Object.keys(KV_CACHE_TYPES) as [KvCacheType, ...KvCacheType[]];

// Looked up once per layer of every candidate the planner tries: plain Maps keep that cheap.
const KV_BYTES = new Map<string, number>(
  Object.entries(KV_CACHE_TYPES).map(([n, t]) => [n, t.bytes / t.block]),
);
const KV_BLOCK = new Map<string, number>(Object.entries(KV_CACHE_TYPES).map(([n, t]) => [n, t.block]));

/** Bytes per element of a KV cache type as llama-server names it (f16, q8_0, …); unknown: f16's. */
export function cacheTypeBytes(name: string): number {
  return KV_BYTES.get(name) ?? 2;
}

/** Elements per block of a KV cache type; a head size must be a multiple of it. Unknown: 1. */
export function cacheTypeBlock(name: string): number {
  return KV_BLOCK.get(name) ?? 1;
}

/** Quantized cache types (blocks of more than one element) need flash attention for V. */
export function isQuantizedCacheType(name: string): boolean {
  return cacheTypeBlock(name) > 1;
}
