import { z } from "zod";

/**
 * A model as `status`, `models.load` and the `models` listing name it (docs/protocol.md#status):
 * a configured name, or the path or `hf:` reference of a GGUF, as given.
 */
export const ModelRefSchema = z.string().min(1).max(4096);

/**
 * A model's llama-server, as a host reads it: `unloaded` (not running), then the states of
 * status's `llama` object (docs/protocol.md#status) for one that runs.
 */
export const ModelStateSchema = z.enum(["unloaded", "starting", "ready", "sleeping", "restarting", "failed"]);
export type ModelState = z.infer<typeof ModelStateSchema>;

/** Status's `models` entry: every configured model (`unloaded` when not running) and any loaded by path. */
export function modelStatusSchema() {
  const count = z.number().int().nonnegative();
  const bytes = count.nullable();
  return z.strictObject({
    /** The configured name, or the path or reference a request loaded it by. */
    name: z.string(),
    path: z.string().nullable(),
    kind: z.enum(["chat", "embedding"]),
    state: ModelStateSchema,
    pid: z.number().int().positive().nullable(),
    /** Never unloaded to make room (the config's `pin`, or `models.load {pin: true}`). */
    pinned: z.boolean(),
    /** Whether it reads images; null until known. */
    vision: z.boolean().nullable(),
    /** What its plan holds of the memory budget; null while unloaded or before a plan. */
    memory_bytes: bytes,
    /** Its last plan's layers on a GPU (`-ngl`); null before a plan. */
    gpu_layers: count.nullable(),
    /**
     * Its starts that ran out of GPU memory in this core, over all its loads (at most 3 counted),
     * each later plan keeping more of the GPU free (docs/supervisor.md).
     */
    gpu_out_of_memory: count,
    /**
     * While its last start, which failed once spawned, holds the next (docs/supervisor.md "Start
     * failures"): until when a chat's start of the same launch answers that failure at once (a
     * warmup or `models.load` tries at once); null when none is held.
     */
    start_held_until: z.string().nullable(),
    rss_bytes: bytes,
    slots: z.strictObject({ busy: count, waiting: count, total: count.nullable() }),
    last_used_at: z.string().nullable(),
  });
}

/** Status's `memory`: per device (`cpu`, `gpu0`…), the budget the plans share and what the loaded models' plans hold. */
export function memoryStatusSchema() {
  const count = z.number().int().nonnegative();
  return z.strictObject({ device: z.string(), budget_bytes: count, planned_bytes: count });
}

/**
 * Status's `models` and `memory`: always sent by this core; optional because cores before several
 * models (docs/models.md, "Several models") leave them out.
 */
export function severalModelsStatusFields() {
  return {
    models: z.array(modelStatusSchema()).optional(),
    memory: z.array(memoryStatusSchema()).optional(),
  };
}
