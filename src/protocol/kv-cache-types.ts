/**
 * The KV cache types llama-server accepts (`--cache-type-k/-v`), as the config takes them and
 * the plan report names them. A plain list, so the config builds no plan schema; the planner's
 * block sizes for each are in plan/ggml-types.ts (a test holds the names equal).
 */
export const KV_CACHE_TYPE_NAMES = [
  "f32",
  "f16",
  "bf16",
  "q8_0",
  "q4_0",
  "q4_1",
  "iq4_nl",
  "q5_0",
  "q5_1",
] as const;
