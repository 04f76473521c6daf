import { listModelsFor } from "../models/list.ts";
import { ModelsParamsSchema, ModelsResultSchema } from "../protocol/models.ts";
import { defineMethod } from "./definition.ts";

/** Every GGUF in the Hugging Face cache and beside the config, with whether it fits this machine. */
export const models = defineMethod({
  name: "models",
  params: ModelsParamsSchema,
  result: () => ModelsResultSchema,
  run: async (_params, _ctx, services) => listModelsFor(services),
});
