import type { ModelKind } from "../config/model-schema.ts";
import type { Config } from "../config/schema.ts";
import type { Plan } from "../protocol/plan.ts";
import type { LaunchPlan } from "./launch-plan.ts";

/** What the planners (planner.ts, embedding-planner.ts) read of the config, and what they give. */

export type PlanConfig = Pick<Config, "model" | "llama" | "hardware"> & {
  app: Pick<Config["app"], "max_parallel_chats" | "data_dir">;
  /** The model's kind, from its `models` entry (configForModel); absent: chat. */
  model_kind?: ModelKind;
};

/** The launch, and the report that explains it (its argv rendered from the launch). */
export interface Planned {
  launch: LaunchPlan;
  plan: Plan;
}
