import { fitVerdictWith } from "../models/fit-verdict.ts";
import { pullModel } from "../models/pull.ts";
import { PullEventFields, PullParamsSchema, PullResultSchema } from "../protocol/pull.ts";
import { logger } from "../util/logger.ts";
import { defineMethod } from "./definition.ts";

/**
 * Downloads a GGUF from the hub into the shared cache (docs/models.md): progress events, resume,
 * verification; cancellable (the partial download is kept for the next pull).
 */
export const pull = defineMethod({
  name: "pull",
  cancellable: true,
  params: PullParamsSchema,
  result: () => PullResultSchema,
  events: () => PullEventFields,
  run: async (params, ctx, services) => {
    const outcome = await pullModel(params, services.pullDeps(), {
      signal: ctx.signal,
      progress: (p) => ctx.emit("download_progress", p),
      note: (message) => logger.warn(message),
    });
    // A cancel during the verdict is answered at once; its probe is the core's shared one, left
    // to finish for the plans after it.
    const fit = await fitVerdictWith(services, outcome.path, ctx.signal);
    return { ...outcome, fit };
  },
});
