import type { Config } from "../config/schema.ts";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import { type PlanDeps, planInputs } from "../plan/launch.ts";
import type { ModelInfo } from "../plan/model.ts";
import { type Plan, type PlanConfig, planFor } from "../plan/planner.ts";
import type { ProjectorChoice } from "../plan/projector.ts";
import { isCoreError } from "../protocol/errors.ts";
import type { FitVerdict } from "../protocol/fit-verdict.ts";
import { abortable } from "../util/abortable.ts";
import { defaultPlanDeps, probeAhead } from "./local-plan-deps.ts";

/**
 * "Would this GGUF run on this machine with the config's settings?": the planner's own answer,
 * the model planned as a launch would plan it. `models`, `pull` and the remote fit check all
 * ask it here, so they all judge alike: a plan is a fit (on its tightest device); a plan error,
 * or settings the config chose that this model cannot take, is no fit; a file that cannot be
 * read (or a config that cannot be used) gives no verdict rather than failing the caller.
 */

const GIB = 1024 ** 3;
const gib = (n: number) => `${(n / GIB).toFixed(2)} GiB`;

/**
 * The verdict from a header already read, on a hardware snapshot already taken, with the vision
 * projector it would launch with (its memory counted; none when absent). Pure.
 */
export function fitVerdict(
  model: ModelInfo,
  hardware: HardwareSnapshot,
  config: PlanConfig,
  projector?: ProjectorChoice,
): FitVerdict {
  try {
    return verdictOfPlan(planFor(model, hardware, config, [], undefined, projector).plan);
  } catch (err) {
    return verdictOfFailure(err);
  }
}

/**
 * The core's plan edges for a verdict, which loads nothing: the shared probe looked at, not
 * taken, so `initialize`'s read-ahead is still the first chat's (plan/probe-ahead.ts).
 */
const verdictDeps: PlanDeps = { ...defaultPlanDeps, probe: (binary) => probeAhead.look(binary) };

/** The verdict for the file at `modelPath`: the config with `model.path` pointed at it, read and planned. */
export async function fitVerdictFor(
  config: Config,
  modelPath: string,
  deps: PlanDeps = verdictDeps,
): Promise<FitVerdict> {
  try {
    // Another file than the configured model: its own projector, if one lies beside it.
    const model = { ...config.model, path: modelPath, mmproj: "auto" };
    const { plan } = await planInputs({ ...config, model }, deps);
    return verdictOfPlan(plan);
  } catch (err) {
    return verdictOfFailure(err);
  }
}

/** Where a command or method has its config: the loaded one, and the defaults. */
export interface ConfigSource {
  config(): Config;
  defaultConfig(): { config: Config };
}

/**
 * The verdict with the config a command or method has: the loaded one, the defaults when there
 * is no config file, and no verdict (saying why) when the file cannot be used. A `signal` that
 * aborts first rejects with its reason at once: the probe (llama-server --list-devices, up to
 * 5 s) goes on without a waiter, a cancelled pull's answer never waited for it.
 */
export async function fitVerdictWith(
  source: ConfigSource,
  modelPath: string,
  signal?: AbortSignal,
  deps: PlanDeps = verdictDeps,
): Promise<FitVerdict> {
  let chosen: Config;
  try {
    chosen = source.config();
  } catch (err) {
    if (!isCoreError(err)) throw err;
    if (err.code !== "config_missing") return noVerdict(err.message);
    chosen = source.defaultConfig().config;
  }
  const verdict = fitVerdictFor(chosen, modelPath, deps);
  return signal ? abortable(verdict, signal) : verdict;
}

function verdictOfPlan(plan: Plan): FitVerdict {
  // The binding device: the one left with the least of its budget.
  const tight = [...plan.devices].sort(
    (a, b) =>
      a.free_after_bytes / Math.max(1, a.budget_bytes) - b.free_after_bytes / Math.max(1, b.budget_bytes),
  )[0]!;
  const where = plan.gpu_layers > 0 ? `${plan.gpu_layers} layer(s) on the GPU` : "on the CPU";
  return {
    fits: true,
    needed_bytes: tight.usage.total,
    available_bytes: tight.budget_bytes,
    device: tight.id,
    context_per_slot: plan.context_per_slot,
    message:
      `fits: ${plan.slots} slot(s) of ${plan.context_per_slot} tokens, ${where}; ` +
      `${tight.id} uses ${gib(tight.usage.total)} of ${gib(tight.budget_bytes)}`,
  };
}

/** What the planner threw, as a verdict; anything but a CoreError is a bug, rethrown. */
function verdictOfFailure(err: unknown): FitVerdict {
  if (!isCoreError(err)) throw err;
  if (err.code !== "model_plan_error" && err.code !== "config_invalid") return noVerdict(err.message);
  const data = err.data ?? {};
  const num = (v: unknown) => (typeof v === "number" ? v : null);
  return {
    fits: false,
    needed_bytes: num(data.needed_bytes),
    available_bytes: num(data.available_bytes),
    device: typeof data.device === "string" ? data.device : null,
    context_per_slot: num(data.context_per_slot),
    message: err.message,
  };
}

function noVerdict(why: string): FitVerdict {
  const none = { needed_bytes: null, available_bytes: null, device: null, context_per_slot: null };
  return { fits: null, ...none, message: `no verdict: ${why}` };
}
