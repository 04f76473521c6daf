import { z } from "zod";
import { SafeIdSchema } from "../protocol/chat.ts";
import { llamaProvider } from "../runtime/provider.ts";
import { userMemory } from "../store/user-memory.ts";
import { defineMethod } from "./types.ts";

export const WarmupParamsSchema = z.object({
  /** Whose memory index to build now rather than at their first chat. */
  user_id: SafeIdSchema.default("default_user"),
});

/**
 * Does ahead of the first chat what the first chat would (SPEC §2 lifecycle): starts
 * llama-server, streaming `warmup_progress` events (phase starting/loading/ready), and builds
 * the user's memory index. Cancellable; cancelling stops the wait, not the start.
 */
export const warmup = defineMethod({
  name: "warmup",
  params: WarmupParamsSchema,
  run: async (params, ctx) => {
    const t0 = Date.now();
    const provider = llamaProvider(ctx.core);
    const lease = await provider.acquire(ctx.signal, (p) => ctx.emit("warmup_progress", { ...p }), {
      explicit: true,
    });
    lease.release();
    if (ctx.core.config().config.memory.enabled) userMemory(ctx.core, params.user_id);
    return { status: "ready", elapsed_ms: Date.now() - t0, slots: provider.slots() };
  },
});
