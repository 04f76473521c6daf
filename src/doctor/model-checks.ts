import { basename } from "node:path";
import {
  configForModel,
  configuredModels,
  type ModelConfig,
  modelSettingKey,
} from "../config/model-entry.ts";
import type { ModelKind } from "../config/model-schema.ts";
import type { Config } from "../config/schema.ts";
import { pinnedPlansProblem, pinnedSetMessage } from "../models/pinned-set.ts";
import { cacheTypesFor } from "../plan/decide/kv-cache.ts";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import { type ModelInfo, notAModel } from "../plan/model.ts";
import { type DevicePlan, type Plan, planFor } from "../plan/planner.ts";
import type { ProjectorChoice } from "../plan/projector.ts";
import { formatBytes } from "../plan/render.ts";
import { isCoreError } from "../protocol/errors.ts";
import type { WorkerReport } from "../rpc/client.ts";
import { type Check, skipped } from "./checks.ts";
import { type ProjectorRead, projectorCheck } from "./projector-check.ts";

/**
 * Every configured model's checks (docs/doctor.md "Several models"): its
 * file (present, readable, a whole GGUF, an `hf:` path in the cache) and its plan (it fits this
 * machine alone), then the pinned models together. `default` keeps the ids `model` and `plan`
 * hosts already read; a `models` entry's are `model:<name>` and `plan:<name>`, with
 * `data.model` naming it (docs/doctor.md).
 */

type ModelResult = { model: ModelInfo } | { error: unknown };

/** One configured model as doctor read it. */
export interface ModelRead {
  name: string;
  kind: ModelKind;
  pin: boolean;
  /** The single-model config it is planned with (configForModel: its kind included). */
  config: ModelConfig;
  /** The key naming its file, for the fix. */
  pathKey: string;
  result: ModelResult;
  /** A readable chat model's projector (docs/models.md "The projector"); absent: none looked for. */
  projector?: ProjectorRead;
}

/** How a model's `mmproj` setting becomes its projector (models/find-projector.ts). */
type FindProjector = (setting: string, model: ModelInfo, key?: string) => Promise<ProjectorChoice>;

/** Reads every configured model's header (and a chat model's projector) at once, `default` first. */
export function readConfiguredModels(
  config: Config,
  readModel: (path: string, key?: string) => Promise<ModelInfo>,
  findProjector?: FindProjector,
): Promise<ModelRead[]> {
  return Promise.all(
    configuredModels(config).map(async (m) => {
      const own = configForModel(config, m.name)!;
      const pathKey = modelSettingKey(own, "path");
      const result: ModelResult = await readModel(own.model.path, pathKey).then(
        (model) => ({ model }),
        (error: unknown) => ({ error }),
      );
      const read: ModelRead = { name: m.name, kind: m.kind, pin: m.pin, config: own, pathKey, result };
      if (!("model" in result) || m.kind !== "chat" || !findProjector || notAModel(result.model)) return read;
      const projector: ProjectorRead = await findProjector(
        own.model.mmproj,
        result.model,
        modelSettingKey(own, "mmproj"),
      ).then(
        (choice) => ({ choice }),
        (error: unknown) => ({ error }),
      );
      return { ...read, projector };
    }),
  );
}

export interface ModelChecks {
  /** `model` and each `model:<name>`. */
  files: Check[];
  /** `plan` and each `plan:<name>`. */
  plans: Check[];
  /** `pinned` when two or more models are pinned, else empty. */
  pinned: Check[];
}

export function modelChecks(
  reads: readonly ModelRead[],
  hw: HardwareSnapshot,
  workers: readonly WorkerReport[],
): ModelChecks {
  const files: Check[] = [];
  const plans: Check[] = [];
  const pinnedPlans: { name: string; devices: DevicePlan[] }[] = [];
  for (const r of reads) {
    files.push(named(modelCheck(r.result, r.pathKey), r.name));
    const mmprojKey = r.pathKey.replace(/path$/, "mmproj");
    const seen = r.projector && projectorCheck(r.projector, mmprojKey);
    if (seen) files.push(named(seen, r.name));
    const model = "model" in r.result ? r.result.model : null;
    const { check, devices } = planCheck(r.config, model, hw, workers, r.projector);
    plans.push(named(check, r.name));
    if (r.pin && devices) pinnedPlans.push({ name: r.name, devices });
  }
  const pinnedCount = reads.filter((r) => r.pin).length;
  return { files, plans, pinned: pinnedCount < 2 ? [] : [pinnedCheck(pinnedPlans, pinnedCount)] };
}

/** `default`'s checks keep their ids; another model's are suffixed with its name. */
function named(check: Check, name: string): Check {
  if (name === "default") return check;
  return { ...check, id: `${check.id}:${name}`, data: { ...check.data, model: name } };
}

/** The pinned models together against the budget (docs/models.md, "Several models"). */
function pinnedCheck(planned: { name: string; devices: DevicePlan[] }[], pinnedCount: number): Check {
  if (planned.length < pinnedCount) return skipped("pinned", "a pinned model could not be planned");
  const problem = pinnedPlansProblem(planned);
  const names = planned.map((p) => p.name);
  if (!problem) {
    return {
      id: "pinned",
      status: "ok",
      message: `the pinned models ${names.join(", ")} fit together`,
      data: { models: names },
    };
  }
  return {
    id: "pinned",
    status: "fail",
    message: pinnedSetMessage(problem),
    // On an RPC worker no smaller context or quantization helps: it serves one model at a time.
    fix: problem.workers
      ? "unpin one of them (pin: false): an RPC worker serves one model at a time"
      : "unpin one of them (pin: false), give one a smaller context or quantization, or free memory",
    data: { code: "model_plan_error", models: problem.models, devices: problem.devices },
  };
}

/** The model file's check: `pathKey` is the config key a fix names (`model.path`, `models.<i>.path`). */
function modelCheck(result: ModelResult, pathKey: string): Check {
  if ("error" in result) {
    const err = result.error;
    const message = isCoreError(err) ? err.message : "the model could not be read";
    const kind = isCoreError(err) ? (err.data?.problem as string | undefined) : undefined;
    const pull = isCoreError(err) ? err.data?.pull : undefined;
    const fix =
      typeof pull === "string"
        ? `fetch it with: ${pull}`
        : kind === "truncated"
          ? "the download was interrupted: download the model again"
          : kind === "absent"
            ? `set ${pathKey} to a .gguf file that exists`
            : `point ${pathKey} at a GGUF model file`;
    return {
      id: "model",
      status: "fail",
      message,
      fix,
      data: {
        code: isCoreError(err) ? err.code : "model_missing",
        problem: kind ?? null,
        ...(pull ? { pull } : {}),
      },
    };
  }
  const m = result.model;
  const refused = notAModel(m);
  if (refused) {
    const mmprojKey = pathKey.replace(/path$/, "mmproj");
    return {
      id: "model",
      status: "fail",
      message: refused,
      fix: `set ${mmprojKey} to this file and ${pathKey} to the model it serves`,
      data: { code: "model_plan_error", path: m.path, architecture: m.architecture },
    };
  }
  const summary = `${basename(m.path)}: ${m.architecture}, ${m.file_type}, ${m.n_layer} layers, trained context ${m.context_train}, ${formatBytes(m.size_bytes)}${m.files.length > 1 ? `, ${m.files.length} shards` : ""}`;
  if (!m.known_architecture) {
    return {
      id: "model",
      status: "warn",
      message: `${summary}; architecture '${m.architecture}' is unknown to the planner`,
      fix: "the memory estimate is best-effort; check that your llama-server supports this architecture",
      data: { path: m.path, architecture: m.architecture },
    };
  }
  return {
    id: "model",
    status: "ok",
    message: summary,
    data: { path: m.path, architecture: m.architecture },
  };
}

/** A chat model's context and slots; an embedding model's pooling and longest input (docs/plan.md). */
function shape(plan: Plan): string {
  const e = plan.embedding;
  if (e)
    return `embeddings (pooling ${e.pooling}), inputs of up to ${e.batch} tokens × ${plan.slots} slot(s)`;
  return `${plan.context_per_slot} tokens × ${plan.slots} slot(s)`;
}

/** The plan's check, and its devices for the pinned set's (null when it failed or was not made). */
function planCheck(
  config: ModelConfig,
  model: ModelInfo | null,
  hw: HardwareSnapshot,
  workers: readonly WorkerReport[],
  projector: ProjectorRead | undefined,
): { check: Check; devices: DevicePlan[] | null } {
  if (!model) return { check: skipped("plan", "the model could not be read"), devices: null };
  if (notAModel(model)) return { check: skipped("plan", "the file is not a model"), devices: null };
  // One cause, one failure: a projector that cannot serve the model is its own check's.
  if (projector && "error" in projector)
    return { check: skipped("plan", "the projector cannot serve the model"), devices: null };
  try {
    const plan = planFor(model, hw, config, workers, undefined, projector?.choice).plan;
    const gpu = plan.gpu_layers_all
      ? "all layers on the GPU"
      : plan.gpu_layers > 0
        ? `${plan.gpu_layers} layers on the GPU`
        : "CPU only";
    const tight = plan.devices.some((d) => d.free_after_bytes < 0.1 * d.budget_bytes);
    const cacheRam = plan.devices.reduce((a, d) => a + d.usage.cache_ram, 0);
    const check: Check = {
      id: "plan",
      status: plan.warnings.some((w) => w.startsWith("memory is tight")) ? "warn" : "ok",
      message: `fits: ${shape(plan)}, ${gpu}, ${plan.threads} threads, RAM prompt cache ${formatBytes(cacheRam)}${tight ? " (tight)" : ""}`,
      ...(plan.warnings.length ? { fix: plan.warnings.join("; ") } : {}),
      data: { argv: plan.argv },
    };
    return { check, devices: plan.devices };
  } catch (err) {
    if (!isCoreError(err)) throw err;
    const check: Check = {
      id: "plan",
      status: "fail",
      message: err.message,
      fix: planFix(err.code, err.data),
      data: { code: err.code, ...err.data },
    };
    return { check, devices: null };
  }
}

/**
 * What to do about a plan that failed. A model_plan_error that names a config key (a KV cache
 * type the model's head size refuses, GPU layers without a GPU) is fixed by changing that key,
 * not by a smaller model.
 */
function planFix(code: string, data: Record<string, unknown> | undefined): string {
  if (code !== "model_plan_error") return "correct the key named in the message";
  const key = typeof data?.key === "string" ? data.key : undefined;
  if (key?.startsWith("llama.cache_type") && typeof data?.head_size === "number") {
    return `set ${key} to ${cacheTypesFor(data.head_size).join(", ")}, or remove it to let the planner choose`;
  }
  if (key) return `change ${key} in the config (the message says why it cannot be used)`;
  return "use a smaller model or quantization, a smaller model.context, or free memory";
}
