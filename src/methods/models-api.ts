import { DEFAULT_MODEL_NAME } from "../config/model-schema.ts";
import { CoreError } from "../protocol/errors.ts";
import type { ModelsApi } from "../runtime/models-api.ts";
import type { Services } from "./services.ts";

/**
 * Several models, for a method that needs them (docs/models.md, "Several models"): a config
 * with no `models` entries serves the model section alone (services.ts makes no scheduler for
 * it), so another model is answered as one it does not have, naming the one it has.
 */
export function modelsApi(services: Services, model: string): ModelsApi {
  const api = services.models?.();
  if (api) return api;
  // `default` itself is there, but loaded and stopped as the one model: by warmup or a chat.
  const advice =
    model === DEFAULT_MODEL_NAME
      ? "its one model ('default') is started by `warmup` or a chat and stopped at shutdown; models.load and models.unload need `models` entries"
      : `so it serves the model section ('default') alone; add one for '${model}'`;
  throw new CoreError("invalid_request", `model: this config has no \`models\` entries; ${advice}`, {
    field: "model",
    reason: "model_not_found",
    available: [DEFAULT_MODEL_NAME],
  });
}
