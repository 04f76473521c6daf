import { z } from "zod";
import { ModelRefSchema, ModelStateSchema } from "./model-state.ts";
import { WarmupProgressFields } from "./warmup-progress.ts";

/**
 * `models.load` (docs/protocol.md#modelsload): starts a model's llama-server ahead of its first
 * chat, streaming `warmup_progress` (with `waiting_for_memory` while other models hold the room).
 */
export const ModelsLoadParamsSchema = z.strictObject({
  /** A configured name, or a GGUF's path or `hf:` reference that the `models` listing shows. */
  model: ModelRefSchema,
  /** Keep it loaded: never unloaded to make room for another model. */
  pin: z.boolean().optional(),
});
export type ModelsLoadParams = z.infer<typeof ModelsLoadParamsSchema>;

export const ModelsLoadResultSchema = z.object({
  /** The name, or the path or reference as the request gave it. */
  model: z.string(),
  state: ModelStateSchema,
  /** What its plan holds of the memory budget (weights, KV cache, compute, prompt cache). */
  memory_bytes: z.number().int().nonnegative(),
});
export type ModelsLoadResult = z.infer<typeof ModelsLoadResultSchema>;

export const ModelsLoadEventFields = { warmup_progress: WarmupProgressFields } as const;
