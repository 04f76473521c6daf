import { answeringFiles, chooseEmbedModel, shownName } from "../config/choose-model.ts";
import { modelFiles } from "../models/model-files.ts";
import { EmbedParamsSchema, EmbedResultSchema } from "../protocol/embed.ts";
import { defineMethod } from "./definition.ts";
import { modelsApi } from "./models-api.ts";

/**
 * `embed` (docs/protocol.md#embed): one vector per string, on the request's model, else
 * memory.embedding_model, else the first `models` entry of kind embedding. Cancellable.
 */
export const embed = defineMethod({
  name: "embed",
  cancellable: true,
  params: EmbedParamsSchema,
  result: () => EmbedResultSchema,
  run: async (params, ctx, services) => {
    // Cancelled while this module loaded: the scheduler would begin the model's load, then drop it.
    ctx.signal.throwIfAborted();
    const config = services.config();
    // A path's drive asked off the loop first (a dead network mount held the core: choose-model.ts).
    const files = await answeringFiles(
      config,
      params.model ?? config.memory.embedding_model ?? undefined,
      modelFiles,
      ctx.signal,
    );
    ctx.signal.throwIfAborted();
    const model = chooseEmbedModel(config, params.model, files);
    const input = typeof params.input === "string" ? [params.input] : params.input;
    const out = await modelsApi(services, model.name).embed(model, input, ctx.signal);
    return { model: shownName(model), ...out };
  },
});
