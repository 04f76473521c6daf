import { answeringFiles, findModel } from "../config/choose-model.ts";
import { modelFiles } from "../models/model-files.ts";
import { ModelsUnloadParamsSchema, ModelsUnloadResultSchema } from "../protocol/models-unload.ts";
import { defineMethod } from "./definition.ts";
import { modelsApi } from "./models-api.ts";

/**
 * `models.unload` (docs/protocol.md#modelsunload): stops a model's llama-server; refused with
 * `model_busy` while chats use it, unless `force`. Cancellable (by its id) only while a path's
 * drive is asked: the unload itself, once begun, is decided and the services' stop joins it.
 */
export const modelsUnload = defineMethod({
  name: "models.unload",
  cancellable: true,
  params: ModelsUnloadParamsSchema,
  result: () => ModelsUnloadResultSchema,
  run: async (params, ctx, services) => {
    ctx.signal.throwIfAborted();
    const config = services.config();
    // A path's drive asked off the loop first (a dead network mount held the core: choose-model.ts);
    // a cancel or the core's stop ends that wait, not the drive's 30 s. Not `signal` for the stop:
    // aborted, an unload by name (no drive asked) read with the shutdown ended `cancelled`.
    const ends = AbortSignal.any([ctx.signal, ctx.stopping]);
    const files = await answeringFiles(config, params.model, modelFiles, ends);
    const model = findModel(config, params.model, files);
    if (!ctx.settle()) throw ctx.signal.reason;
    return modelsApi(services, params.model).unload(model, { force: params.force });
  },
});
