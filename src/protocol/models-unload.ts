import { z } from "zod";
import { ModelRefSchema } from "./model-state.ts";

/**
 * `models.unload` (docs/protocol.md#modelsunload): stops a model's llama-server. Refused
 * (`invalid_request`, `data.reason: "model_busy"`) while a chat runs on it or waits for it,
 * unless `force`: those chats then end `cancelled`.
 */
export const ModelsUnloadParamsSchema = z.strictObject({
  model: ModelRefSchema,
  force: z.boolean().default(false),
});
export type ModelsUnloadParams = z.infer<typeof ModelsUnloadParamsSchema>;

export const ModelsUnloadResultSchema = z.object({
  model: z.string(),
  /** false: it was not loaded. */
  unloaded: z.boolean(),
});
export type ModelsUnloadResult = z.infer<typeof ModelsUnloadResultSchema>;
