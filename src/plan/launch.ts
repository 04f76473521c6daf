import { statSync } from "node:fs";
import { resolve } from "node:path";
import { readConfigFile } from "../config/config-file.ts";
import { llamaServerAsked } from "../config/find-binary-asked.ts";
import { type ModelConfig, modelSettingKey } from "../config/model-entry.ts";
import type { Config, RpcWorkerConfig } from "../config/schema.ts";
import { checkWorkers } from "../rpc/check.ts";
import type { WorkerReport } from "../rpc/client.ts";
import { type TemplateFile, templateFileOf } from "./decide/chat-template.ts";
import type { HardwareSnapshot } from "./hardware.ts";
import type { LaunchPlan } from "./launch-plan.ts";
import type { ModelInfo } from "./model.ts";
import { type Plan, planFor } from "./planner.ts";
import type { ProjectorChoice } from "./projector.ts";

export type { LaunchPlan } from "./launch-plan.ts";

/**
 * The edges the plan reads through; tests replace them. The core's own, with `hf:` models
 * resolved from the cache, are `defaultPlanDeps` (src/models/local-plan-deps.ts).
 */
export interface PlanDeps {
  /** The machine, with the llama-server that will run on it asked for its devices when given. */
  probe(binary?: string): Promise<HardwareSnapshot>;
  /** `key`: the config key that holds `path` (`model.path` when absent), for a refusal to name. */
  readModel(path: string, key?: string): Promise<ModelInfo>;
  /**
   * Asks `llama.rpc`'s workers what they have; the real query when absent. `server`: the
   * llama-server the plan is for, when found (a version another build refused is asked again).
   */
  workers?(workers: readonly RpcWorkerConfig[], options?: { server?: string }): Promise<WorkerReport[]>;
  /** Reads a chat template file that llama.extra_args name; the bounded file read when absent. */
  readTemplate?(path: string): string;
  /**
   * The vision projector for a chat model's `mmproj` setting (models/find-projector.ts: a
   * configured one that cannot serve the model throws `model_plan_error`); absent: none. `key`:
   * the config key that holds `setting` (`model.mmproj` when absent).
   */
  findProjector?(setting: string, model: ModelInfo, key?: string): Promise<ProjectorChoice>;
  /** The llama-server the plan is for, when found; config/find-binary-asked.ts's when absent. */
  findServer?(config: ModelConfig): Promise<string | undefined>;
}

export interface PlanInputs {
  model: ModelInfo;
  hardware: HardwareSnapshot;
  plan: Plan;
  launch: LaunchPlan;
}

/** Config → model header + hardware probes → plan. Throws CoreError model_missing / model_plan_error. */
export async function planInputs(config: ModelConfig, deps: PlanDeps): Promise<PlanInputs> {
  // An embedding model runs on this machine only (embedding-planner.ts): its workers are not asked.
  const rpc = config.model_kind === "embedding" ? [] : config.llama.rpc;
  // The model is read beside the llama-server lookup, not after it: a PATH folder on a dead
  // share holds the lookup for its drive's wait (util/drive-answers.ts), and a missing or
  // unreadable model was told only after it. Workers are asked at every plan, so every start
  // plans on the workers that answer now.
  const server = (deps.findServer ?? llamaServerAsked)(config);
  const read = deps.readModel(config.model.path, modelSettingKey(config, "path"));
  // The projector is looked for once the model is read, beside the probe (its device list, tens
  // of ms), not after it: a cold chat's spawn waited for both (docs/performance.md).
  const [model, hardware, workers, projector] = await Promise.all([
    read,
    server.then((found) => deps.probe(found)),
    rpc.length > 0
      ? server.then((found) => (deps.workers ?? checkWorkers)(rpc, found ? { server: found } : {}))
      : Promise.resolve([]),
    read.then((model) => projectorOf(config, model, deps)),
  ]);
  const template = templateFile(config, deps);
  return { model, hardware, ...planFor(model, hardware, config, workers, template, projector) };
}

/** A chat model's projector; an embedding model reads no images, and none is looked for. */
async function projectorOf(config: ModelConfig, model: ModelInfo, deps: PlanDeps): Promise<ProjectorChoice> {
  if (config.model_kind === "embedding")
    return { kind: "none", reason: "an embedding model reads no images" };
  if (!deps.findProjector) return { kind: "none", reason: "no projector was looked for" };
  return deps.findProjector(config.model.mmproj, model, modelSettingKey(config, "mmproj"));
}

/**
 * The `--chat-template-file` of llama.extra_args, read to tell whether it thinks. A relative
 * path is llama-server's to resolve, against the core's folder (its working directory).
 */
function templateFile(config: Config, deps: PlanDeps): TemplateFile | undefined {
  const path = templateFileOf(config.llama.extra_args);
  if (path === undefined) return undefined;
  try {
    return { path, text: (deps.readTemplate ?? readTemplateFile)(resolve(path)) };
  } catch (err) {
    return { path, problem: (err as Error).message };
  }
}

/**
 * A template file's text. llama-server takes its bytes as they are (common/arg.cpp read_file):
 * only a file of none is no template (the model's own applies). One of a byte-order mark alone,
 * which the config's reading drops, is a template with no think block: read as empty, it was
 * planned as the model's own, a thinking one shown as thinking.
 */
function readTemplateFile(path: string): string {
  const text = readConfigFile(path);
  return text === "" && statSync(path).size > 0 ? "\uFEFF" : text;
}

/** What the supervisor launches (argv is rendered from it at spawn, without --host/--port/--api-key). */
export async function planLaunch(config: ModelConfig, deps: PlanDeps): Promise<LaunchPlan> {
  return (await planInputs(config, deps)).launch;
}
