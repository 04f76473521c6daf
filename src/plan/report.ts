import type { Config } from "../config/schema.ts";
import type { ModelSummary, PlanReport } from "../protocol/plan.ts";
import { type PlanDeps, planInputs } from "./launch.ts";
import type { ModelInfo } from "./model.ts";

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

/** Throws the plan's CoreError (model_missing, model_plan_error) unchanged. */
export async function buildPlanReport(config: Config, deps: PlanDeps): Promise<PlanReport> {
  const { model, hardware, plan } = await planInputs(config, deps);
  return { fits: true, model: summariseModel(model), hardware, plan };
}
