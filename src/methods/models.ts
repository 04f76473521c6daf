import { z } from "zod";
import { listModelsFor } from "../models/list.ts";
import { ModelsResultSchema } from "../models/list-schema.ts";
import { defineMethod } from "./definition.ts";

/** Every GGUF in the Hugging Face cache and beside the config, with whether it fits this machine. */
export const models = defineMethod({
  name: "models",
  params: z.strictObject({}),
  result: () => ModelsResultSchema,
  run: async (_params, _ctx, services) => listModelsFor(services),
});
