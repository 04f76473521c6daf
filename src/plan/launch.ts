import type { Config, RpcWorkerConfig } from "../config/schema.ts";
import { checkWorkers } from "../rpc/check.ts";
import type { WorkerReport } from "../rpc/client.ts";
import type { HardwareSnapshot } from "./hardware.ts";
import type { ModelInfo } from "./model.ts";
import { makePlan, type Plan } from "./planner.ts";

/** What the supervisor launches: the planned flags, without --host/--port/--api-key. */
export interface LaunchPlan {
  argv: string[];
  slots: number;
  context_per_slot: number;
  model_path: string;
  max_tokens: number | null;
  /** The RPC workers passed to `--rpc` (the supervisor watches them while the server runs). */
  rpc_workers?: string[];
  /** The GGUF's `general.name` and its size (all files of a split model), for status and load progress. */
  model_name?: string | null;
  model_bytes?: number;
}

/**
 * The edges the plan reads through; tests replace them. The core's own, with `hf:` models
 * resolved from the cache, are `defaultPlanDeps` (src/models/local-plan-deps.ts).
 */
export interface PlanDeps {
  probe(): Promise<HardwareSnapshot>;
  readModel(path: string): Promise<ModelInfo>;
  /** Asks `llama.rpc`'s workers what they have; the real query when absent. */
  workers?(workers: readonly RpcWorkerConfig[]): Promise<WorkerReport[]>;
}

export interface PlanInputs {
  model: ModelInfo;
  hardware: HardwareSnapshot;
  plan: Plan;
}

/** Config → model header + hardware probes → plan. Throws CoreError model_missing / model_plan_error. */
export async function planInputs(config: Config, deps: PlanDeps): Promise<PlanInputs> {
  const rpc = config.llama.rpc;
  // Workers are asked at every plan, so every start plans on the workers that answer now.
  const [model, hardware, workers] = await Promise.all([
    deps.readModel(config.model.path),
    deps.probe(),
    rpc.length > 0 ? (deps.workers ?? checkWorkers)(rpc) : Promise.resolve([]),
  ]);
  return { model, hardware, plan: makePlan(model, hardware, config, workers) };
}

export async function planLaunch(config: Config, deps: PlanDeps): Promise<LaunchPlan> {
  const { plan, model } = await planInputs(config, deps);
  return {
    argv: plan.argv,
    slots: plan.slots,
    context_per_slot: plan.context_per_slot,
    model_path: plan.model_path,
    max_tokens: plan.max_tokens,
    rpc_workers: plan.workers.filter((w) => w.status === "used").map((w) => w.endpoint),
    model_name: model.name,
    model_bytes: model.size_bytes,
  };
}
