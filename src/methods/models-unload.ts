import { answeringFiles, findModel } from "../config/choose-model.ts";
import { modelFiles } from "../models/model-files.ts";
import { ModelsUnloadParamsSchema, ModelsUnloadResultSchema } from "../protocol/models-unload.ts";
import { defineMethod } from "./definition.ts";
import { modelsApi } from "./models-api.ts";

/**
 * `models.unload` (docs/protocol.md#modelsunload): stops a model's llama-server; refused with
 * `model_busy` while chats use it, unless `force`.
 */
export const modelsUnload = defineMethod({
  name: "models.unload",
  params: ModelsUnloadParamsSchema,
  result: () => ModelsUnloadResultSchema,
  run: async (params, _ctx, services) => {
    const config = services.config();
    // A path's drive asked off the loop first (a dead network mount held the core: choose-model.ts).
    const model = findModel(config, params.model, await answeringFiles(config, params.model, modelFiles));
    return modelsApi(services, params.model).unload(model, { force: params.force });
  },
});
