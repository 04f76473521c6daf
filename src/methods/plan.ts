import { configForModel } from "../config/model-entry.ts";
import { planReportWithHub } from "../models/plan-with-hub.ts";
import { PlanParamsSchema, PlanReportSchema } from "../protocol/plan.ts";
import { defineMethod } from "./definition.ts";
import type { Services } from "./services.ts";

/**
 * `plan` (docs/protocol.md#plan): the model section's plan, or `model`'s: a configured name is
 * planned as if it were alone, with its own keys (docs/models.md, "Several models"); anything
 * else is a GGUF's path or `hf:` reference.
 */
export const plan = defineMethod({
  name: "plan",
  params: PlanParamsSchema,
  result: () => PlanReportSchema,
  run: async (params, _ctx, services) => {
    const named = params.model === undefined ? undefined : namedConfig(services, params.model);
    if (named) return planReportWithHub(named);
    return planReportWithHub(services, { model: params.model });
  },
});

/** The config source for a configured model's name; undefined when it names none (or no config loads). */
function namedConfig(services: Services, name: string) {
  let loaded: ReturnType<Services["loadedConfig"]>;
  try {
    loaded = services.loadedConfig();
  } catch {
    return undefined; // Left for the path's plan to report or to plan with the defaults.
  }
  const config = configForModel(loaded.config, name);
  if (!config) return undefined;
  return { loadedConfig: () => ({ ...loaded, config }), defaultConfig: () => services.defaultConfig() };
}
