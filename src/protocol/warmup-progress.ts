import { z } from "zod";

/**
 * The fields of `warmup_progress` events: what a chat or a warmup hears while it waits for
 * llama-server to start, restart or wake (docs/protocol.md#warmup_progress). At least one every 500
 * ms while waiting; `elapsed_ms` counts from the start of what is being waited for (a start, a
 * wake). Hosts written before `restarting`, `waking`, `elapsed_ms` on `starting` and `fraction`
 * existed read the same three phases as before.
 */
const elapsed = z.number().nonnegative();
/**
 * Share of the model file llama-server has read so far, 0–1, where the OS lets the core see
 * it (Linux: resident pages of the .gguf mapping, or bytes read without mmap). Reading is not
 * all of a load (weights may be repacked, the KV cache allocated afterwards): `ready` says
 * when it is done. Absent where nothing honest can be measured.
 */
const fraction = z.number().min(0).max(1).optional();

export const WarmupProgressFields = z.discriminatedUnion("phase", [
  /** Waiting before a restart: the back-off after a crash, or a failed server being stopped. */
  z.object({
    phase: z.literal("restarting"),
    elapsed_ms: elapsed,
    /** The back-off this restart waits out before it starts (absent while a failed server stops). */
    backoff_ms: z.number().nonnegative().optional(),
  }),
  /** Planning and spawning llama-server; `attempt` counts launches (another port after a bind failure). */
  z.object({ phase: z.literal("starting"), attempt: z.number().int().positive(), elapsed_ms: elapsed }),
  /** Spawned; the model is loading (llama-server answers 503 meanwhile). */
  z.object({ phase: z.literal("loading"), elapsed_ms: elapsed, fraction }),
  /** Reloading the model after idle sleep (llama.idle_sleep_s). */
  z.object({ phase: z.literal("waking"), elapsed_ms: elapsed, fraction }),
  /**
   * Several models (docs/models.md, "Several models"): the load waits for memory that busy or
   * pinned models hold, up to llama.load_wait_s; `models` names them.
   */
  z.object({ phase: z.literal("waiting_for_memory"), elapsed_ms: elapsed, models: z.array(z.string()) }),
  z.object({ phase: z.literal("ready"), elapsed_ms: elapsed }),
]);
export type WarmupProgress = z.infer<typeof WarmupProgressFields>;
