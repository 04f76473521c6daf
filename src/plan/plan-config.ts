import type { ModelKind } from "../config/model-schema.ts";
import type { Config } from "../config/schema.ts";
import type { Plan } from "../protocol/plan.ts";
import type { LaunchPlan } from "./launch-plan.ts";

/** What the planners (planner.ts, embedding-planner.ts) read of the config, and what they give. */

export type PlanConfig = Pick<Config, "model" | "llama" | "hardware"> & {
  app: Pick<Config["app"], "max_parallel_chats" | "data_dir">;
  /** The model's kind, from its `models` entry (configForModel); absent: chat. */
  model_kind?: ModelKind;
  /**
   * Starts of this model that ran out of memory with layers on a GPU (runtime/launcher.ts): each
   * keeps more of every GPU free (decide/budgets.ts `outOfMemoryMargin`). Absent: none.
   */
  gpu_out_of_memory?: number;
};

/** The launch, and the report that explains it (its argv rendered from the launch). */
export interface Planned {
  launch: LaunchPlan;
  plan: Plan;
}
