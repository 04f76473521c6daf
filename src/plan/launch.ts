import type { Config } from "../config/schema.ts";
import { readGgufHeader } from "./gguf-read.ts";
import type { HardwareSnapshot } from "./hardware.ts";
import { type ModelInfo, modelInfo } from "./model.ts";
import { makePlan, type Plan } from "./planner.ts";
import { probeHardware } from "./probe.ts";

/** What the supervisor launches: the planned flags, without --host/--port/--api-key. */
export interface LaunchPlan {
  argv: string[];
  slots: number;
  context_per_slot: number;
  model_path: string;
  max_tokens: number | null;
  /** The GGUF's `general.name` and its size (all files of a split model), for status and load progress. */
  model_name?: string | null;
  model_bytes?: number;
}

/** The edges the plan reads through; tests replace them. */
export interface PlanDeps {
  probe(): Promise<HardwareSnapshot>;
  readModel(path: string): Promise<ModelInfo>;
}

export const defaultPlanDeps: PlanDeps = {
  probe: () => probeHardware(),
  readModel: async (path) => modelInfo(await readGgufHeader(path)),
};

export interface PlanInputs {
  model: ModelInfo;
  hardware: HardwareSnapshot;
  plan: Plan;
}

/** Config → model header + hardware probes → plan. Throws CoreError model_missing / model_plan_error. */
export async function planInputs(config: Config, deps: PlanDeps = defaultPlanDeps): Promise<PlanInputs> {
  const [model, hardware] = await Promise.all([deps.readModel(config.model.path), deps.probe()]);
  return { model, hardware, plan: makePlan(model, hardware, config) };
}

export async function planLaunch(config: Config, deps: PlanDeps = defaultPlanDeps): Promise<LaunchPlan> {
  const { plan, model } = await planInputs(config, deps);
  return {
    argv: plan.argv,
    slots: plan.slots,
    context_per_slot: plan.context_per_slot,
    model_path: plan.model_path,
    max_tokens: plan.max_tokens,
    model_name: model.name,
    model_bytes: model.size_bytes,
  };
}
