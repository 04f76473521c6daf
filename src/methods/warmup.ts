import { DEFAULT_MODEL_NAME } from "../config/model-schema.ts";
import { WarmupEventFields, WarmupParamsSchema, WarmupResultSchema } from "../protocol/warmup.ts";
import { dataDirError } from "../store/data-dir-problem.ts";
import { abortable } from "../util/abortable.ts";
import { defineMethod } from "./definition.ts";

/**
 * Does ahead of the first chat what the first chat would (docs/protocol.md#lifecycle): starts
 * llama-server, streaming `warmup_progress` events (phases
 * restarting/starting/loading/waking/ready), and opens the conversation database. Cancellable;
 * cancelling stops the wait, not the start.
 */
export const warmup = defineMethod({
  name: "warmup",
  cancellable: true,
  params: WarmupParamsSchema,
  result: () => WarmupResultSchema,
  events: () => WarmupEventFields,
  run: async (_params, ctx, services) => {
    // Cancelled while this module loaded (docs/protocol.md#cancel): a cancel stops the wait, not
    // the start, so no start may begin for it (a core with `models` entries began one).
    ctx.signal.throwIfAborted();
    const t0 = Date.now();
    const provider = services.llama();
    // With `models` entries the warmup is `default`'s user as a chat is, before anything yields:
    // an unload is refused model_busy, a forced one ends it `cancelled` as it ends the chats
    // (docs/protocol.md#modelsunload), not with the stopping server's shutdown message.
    const watch = services.models?.()?.chatSignal({ kind: "path", name: DEFAULT_MODEL_NAME }, ctx.signal);
    // A chat is coming: memory's job, granted an idle chat model's room, would unload the model
    // warmed here at its next batch (store/embed-room.ts). Counted by the core: a job made meanwhile waits too.
    const ended = services.chatBegan?.();
    try {
      // An explicit warm-up tries again at once, even when the restart budget is spent.
      const lease = await provider
        .acquire(watch?.signal ?? ctx.signal, (p) => ctx.emit("warmup_progress", { ...p }), {
          explicit: true,
        })
        .catch((err: unknown) => {
          // As chat does: a data_dir that cannot be written is named, not "see the log".
          throw dataDirError(err, services.config().app.data_dir) ?? err;
        });
      lease.release();
    } finally {
      watch?.done();
      ended?.();
    }
    // The database opens now (and imports a 0.1 folder once), not on the first chat's path.
    // An older database's migrations, run on their thread (begun here if not yet), waited for first.
    await abortable(services.storeReady(), ctx.signal);
    services.store();
    return { status: "ready" as const, elapsed_ms: Date.now() - t0, slots: provider.slots() };
  },
});
