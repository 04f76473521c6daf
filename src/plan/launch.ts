import type { Config } from "../config/schema.ts";
import { resolveModelPath } from "../models/resolve.ts";
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
}

/** The edges the plan reads through; tests replace them. */
export interface PlanDeps {
  probe(): Promise<HardwareSnapshot>;
  readModel(path: string): Promise<ModelInfo>;
}

export const defaultPlanDeps: PlanDeps = {
  probe: () => probeHardware(),
  // `hf:org/name:QUANT` resolves from the Hugging Face cache here, the one place plan, chat
  // and doctor read the model through (model_missing names the pull command when absent).
  readModel: async (path) => modelInfo(await readGgufHeader(resolveModelPath(path))),
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
  const { plan } = await planInputs(config, deps);
  return {
    argv: plan.argv,
    slots: plan.slots,
    context_per_slot: plan.context_per_slot,
    model_path: plan.model_path,
    max_tokens: plan.max_tokens,
  };
}
