import { z } from "zod";
import { llamaProvider } from "../runtime/provider.ts";
import { defineMethod } from "./types.ts";

/**
 * Starts llama-server ahead of the first chat, streaming `warmup_progress` events
 * (phase starting/loading/ready). Cancellable; cancelling stops the wait, not the start.
 */
export const warmup = defineMethod({
  name: "warmup",
  params: z.object({}).loose(),
  run: async (_params, ctx) => {
    const t0 = Date.now();
    const lease = await llamaProvider(ctx.core).acquire(ctx.signal, (p) =>
      ctx.emit("warmup_progress", { ...p }),
    );
    lease.release();
    return { status: "ready", elapsed_ms: Date.now() - t0, slots: llamaProvider(ctx.core).slots() };
  },
});
