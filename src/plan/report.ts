import type { Core } from "../server/core.ts";
import type { HardwareSnapshot } from "./hardware.ts";
import { defaultPlanDeps, type PlanDeps, planInputs } from "./launch.ts";
import type { ModelInfo } from "./model.ts";
import type { Plan } from "./planner.ts";

/** The `plan` method's result and the CLI's `--json`: the same object. */
export interface PlanReport {
  fits: true;
  model: ModelSummary;
  hardware: HardwareSnapshot;
  plan: Plan;
}

/** The model as a host sees it: ModelInfo's identity fields, its shape under plain names. */
export type ModelSummary = Pick<
  ModelInfo,
  | "path"
  | "files"
  | "gguf_version"
  | "size_bytes"
  | "architecture"
  | "known_architecture"
  | "name"
  | "file_type"
  | "parameters"
  | "context_train"
  | "sliding_window"
> & {
  layers: number;
  embedding: number;
  heads: number;
  kv_heads: number;
  vocab: number;
  mla: boolean;
  experts: { count: number; used: number } | null;
};

export function summariseModel(m: ModelInfo): ModelSummary {
  return {
    path: m.path,
    files: m.files,
    gguf_version: m.gguf_version,
    size_bytes: m.size_bytes,
    architecture: m.architecture,
    known_architecture: m.known_architecture,
    name: m.name,
    file_type: m.file_type,
    parameters: m.parameters,
    layers: m.n_layer,
    context_train: m.context_train,
    embedding: m.n_embd,
    heads: m.n_head,
    kv_heads: m.n_head_kv,
    vocab: m.n_vocab,
    sliding_window: m.sliding_window,
    mla: m.mla !== null,
    experts: m.experts ? { count: m.experts.count, used: m.experts.used } : null,
  };
}

/** Throws the plan's CoreError (config_*, model_missing, model_plan_error) unchanged. */
export async function buildPlanReport(core: Core, deps: PlanDeps = defaultPlanDeps): Promise<PlanReport> {
  const { model, hardware, plan } = await planInputs(core, deps);
  return { fits: true, model: summariseModel(model), hardware, plan };
}
