import { answeringFiles, findModel } from "../config/choose-model.ts";
import { modelFiles } from "../models/model-files.ts";
import {
  ModelsLoadEventFields,
  ModelsLoadParamsSchema,
  ModelsLoadResultSchema,
} from "../protocol/models-load.ts";
import { defineMethod } from "./definition.ts";
import { modelsApi } from "./models-api.ts";

/**
 * `models.load` (docs/protocol.md#modelsload): a model's llama-server started ahead of its
 * requests, with `warmup_progress`; cancelling stops the wait, not the load (as warmup).
 */
export const modelsLoad = defineMethod({
  name: "models.load",
  cancellable: true,
  params: ModelsLoadParamsSchema,
  result: () => ModelsLoadResultSchema,
  events: () => ModelsLoadEventFields,
  run: async (params, ctx, services) => {
    // Cancelled while this module loaded (docs/protocol.md#cancel): a cancel stops the wait, not
    // the load, so no load may begin for it.
    ctx.signal.throwIfAborted();
    const config = services.config();
    // A path's drive asked off the loop first (a dead network mount held the core: choose-model.ts).
    const files = await answeringFiles(config, params.model, modelFiles, ctx.signal);
    ctx.signal.throwIfAborted();
    const model = findModel(config, params.model, files);
    const api = modelsApi(services, params.model);
    // A request for the model is coming, as after a warmup: memory's job, granted an idle chat
    // model's room, would unload the model loaded here at its next batch (store/embed-room.ts).
    const ended = services.chatBegan?.();
    try {
      return await api.load(model, {
        pin: params.pin,
        signal: ctx.signal,
        onProgress: (p) => ctx.emit("warmup_progress", { ...p }),
      });
    } finally {
      ended?.();
    }
  },
});
