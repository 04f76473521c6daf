import { resolve } from "node:path";
import {
  answeringFiles,
  findModel,
  looksLikePath,
  type ModelFiles,
  modelNotFound,
} from "../config/choose-model.ts";
import { configForModel, type ModelConfig } from "../config/model-entry.ts";
import type { Config, LoadedConfig } from "../config/schema.ts";
import type { PlanDeps } from "../plan/launch.ts";
import { buildPlanReport } from "../plan/report.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import { HF_PREFIX, parseHfModelPath } from "../protocol/model-ref.ts";
import type { PlanReport } from "../protocol/plan.ts";
import type { Env } from "./hf-cache.ts";
import type { RemoteDeps } from "./hub-header.ts";
import { planDepsWithHub } from "./hub-plan-deps.ts";
import { defaultPlanDeps } from "./local-plan-deps.ts";
import { modelFiles } from "./model-files.ts";
import { pinnedSetMessage, pinnedSetProblem } from "./pinned-set.ts";

/** Where `plan` reads the config (the core's services, or the CLI's). */
export interface PlanConfigSource {
  loadedConfig(): LoadedConfig;
  defaultConfig(): LoadedConfig;
  /**
   * Starts of a configured model's server (`default`: the model section's) that ran out of GPU
   * memory in this core (status's `gpu_out_of_memory`): its next start keeps that much more of
   * the GPU free, and so does its plan. Absent (the CLI's): none.
   */
  outOfMemoryStarts?(model: string): number;
}

/**
 * `plan` with an optional model of the caller's choosing in place of model.path: a configured
 * name (taken first, as a chat's model is: docs/models.md "Several models"), planned with its own
 * keys as if it were alone; else a path, resolved against `base`, or `hf:…`, with the hub as a
 * fallback for an `hf:` model not yet pulled. With a model given, a missing config means the
 * defaults: "will this fit?" needs no config. A configured model's plan warns when the pinned
 * models cannot stay loaded together.
 */
export async function planReportWithHub(
  source: PlanConfigSource,
  options: { model?: string; base?: string } = {},
  env: Env = process.env,
  deps: RemoteDeps & { plan?: PlanDeps } = {},
): Promise<PlanReport> {
  let loaded: LoadedConfig;
  try {
    loaded = source.loadedConfig();
  } catch (err) {
    if (!options.model || !isCoreError(err) || err.code !== "config_missing") throw err;
    loaded = source.defaultConfig();
  }
  const model = options.model;
  const byName = model === undefined ? undefined : configForModel(loaded.config, model);
  // Only a path or `hf:` reference is matched by its file: a name taken for a path under the
  // config's folder had every configured model's drive asked (a dead mount held the plan 30 s).
  const byPath = model !== undefined && !byName && (model.startsWith(HF_PREFIX) || looksLikePath(model));
  const ref = byPath ? refOf(model, options.base ?? loaded.dir) : undefined;
  const files = ref ? await answeredFiles(loaded, ref, deps.signal) : modelFiles;
  const byFile = ref ? configuredByFile(loaded, ref, files) : undefined;
  const named = model === undefined ? loaded.config : (byName ?? byFile?.config);
  // A bare word that names no model is unknown, as for a chat (docs/models.md "Choosing"), not a file.
  if (!named && model && !model.startsWith(HF_PREFIX) && !looksLikePath(model))
    throw modelNotFound(loaded.config, model);
  const config: ModelConfig = named ?? {
    ...loaded.config,
    model_key: null,
    model: {
      ...loaded.config.model,
      path: ref!,
      // Another model than the configured one: its own projector, if one lies beside it.
      mmproj: "auto",
    },
  };
  if (!named && model?.startsWith(HF_PREFIX)) parseModelOption(model);
  const planDeps = deps.plan ?? defaultPlanDeps;
  const ranOut =
    source.outOfMemoryStarts?.(
      named ? (byFile?.name ?? model ?? "default") : loadedAs(loaded.config, config, files),
    ) ?? 0;
  const planned: ModelConfig = ranOut > 0 ? { ...config, gpu_out_of_memory: ranOut } : config;
  const report = await buildPlanReport(planned, planDepsWithHub(planDeps, env, deps));
  // Pinned models are read offline: one not pulled is its own plan's error, not this warning's.
  const problem = named ? await pinnedSetProblem(loaded.config, planDeps) : null;
  if (!problem) return report;
  const warnings = [...report.plan.warnings, pinnedSetMessage(problem)];
  return { ...report, plan: { ...report.plan, warnings } };
}

/** A model option as a file: an `hf:` reference as it is, a relative path the config folder's, as `plan` reads one. */
function refOf(model: string, base: string): string {
  return model.startsWith(HF_PREFIX) ? model : resolve(base, model);
}

/**
 * The configured model a path or `hf:` reference names by its file, as a chat by it runs that
 * model, its server and its keys (config/choose-model.ts `findModel`): planned as a bare path,
 * with the model section's keys, its plan was not the one its chat got (`ref` resolved).
 */
function configuredByFile(
  loaded: LoadedConfig,
  ref: string,
  files: ModelFiles,
): { name: string; config: ModelConfig } | undefined {
  try {
    const found = findModel(loaded.config, ref, files);
    const config = found.kind === "configured" ? configForModel(loaded.config, found.name) : undefined;
    return config ? { name: found.name, config } : undefined;
  } catch {
    return undefined; // A malformed `hf:` reference: refused below, as before.
  }
}

/**
 * The files `model` is matched with, as a chat's (config/choose-model.ts `answeringFiles`): the
 * drives asked and the `hf:` references resolved off the loop (a snapshot of 10^4 files listed
 * on it held ping). A path whose drive does not answer is matched by its spelling: its plan's
 * read says it is unreadable. `signal` (the core's stop) ends the wait for the drives at once.
 */
async function answeredFiles(loaded: LoadedConfig, ref: string, signal?: AbortSignal): Promise<ModelFiles> {
  return answeringFiles(loaded.config, ref, modelFiles, signal).catch(() => {
    if (signal?.aborted) throw signal.reason;
    return { canonical: (p: string) => resolve(p), cached: () => null };
  });
}

/**
 * The name a chat would load a model given by path under (config/choose-model.ts `findModel`):
 * a configured model's when it is that file, else its path made one spelling, or its `hf:` reference.
 */
function loadedAs(configured: Config, planned: Config, files: ModelFiles): string {
  try {
    return findModel(configured, planned.model.path, files).name;
  } catch {
    return planned.model.path;
  }
}

/** A malformed `hf:` model given to plan is the request's fault: invalid_request naming it. */
function parseModelOption(model: string): void {
  try {
    parseHfModelPath(model);
  } catch (err) {
    throw new CoreError("invalid_request", `model: ${(err as Error).message}`, { key: "model" });
  }
}
