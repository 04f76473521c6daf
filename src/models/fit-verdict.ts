import type { Config } from "../config/schema.ts";
import { type PlanDeps, planInputs } from "../plan/launch.ts";
import { isCoreError } from "../protocol/errors.ts";
import { defaultPlanDeps } from "./local-plan-deps.ts";

/**
 * Would this GGUF run on this machine with the config's settings? The planner's own answer:
 * the config with `model.path` pointed at the file, planned as a launch would be. A model that
 * does not fit says which device is short and by how much; a file the planner cannot read
 * (or a config that cannot be used) gives no verdict rather than failing the caller.
 */
export interface FitVerdict {
  /** null when no verdict could be reached (the message says why). */
  fits: boolean | null;
  /** What the plan needs on the binding device (fits), or on the first short one (does not). */
  needed_bytes: number | null;
  available_bytes: number | null;
  device: string | null;
  context_per_slot: number | null;
  message: string;
}

const GIB = 1024 ** 3;
const gib = (n: number) => `${(n / GIB).toFixed(2)} GiB`;

export async function fitVerdict(
  config: Config,
  modelPath: string,
  deps: PlanDeps = defaultPlanDeps,
): Promise<FitVerdict> {
  const none = { needed_bytes: null, available_bytes: null, device: null, context_per_slot: null };
  try {
    const { plan } = await planInputs({ ...config, model: { ...config.model, path: modelPath } }, deps);
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
  } catch (err) {
    if (!isCoreError(err)) throw err;
    if (err.code === "model_plan_error" && typeof err.data?.needed_bytes === "number")
      return {
        fits: false,
        needed_bytes: err.data.needed_bytes,
        available_bytes: typeof err.data.available_bytes === "number" ? err.data.available_bytes : null,
        device: typeof err.data.device === "string" ? err.data.device : null,
        context_per_slot: typeof err.data.context_per_slot === "number" ? err.data.context_per_slot : null,
        message: err.message,
      };
    return { fits: null, ...none, message: `no verdict: ${err.message}` };
  }
}

/**
 * The verdict with the config a command or method has: the loaded one, the defaults when there
 * is no config file, and no verdict (saying why) when the file cannot be used.
 */
export async function fitVerdictWith(
  config: () => Config,
  defaults: () => Config,
  modelPath: string,
  deps: PlanDeps = defaultPlanDeps,
): Promise<FitVerdict> {
  let chosen: Config;
  try {
    chosen = config();
  } catch (err) {
    if (!isCoreError(err)) throw err;
    if (err.code !== "config_missing")
      return {
        fits: null,
        needed_bytes: null,
        available_bytes: null,
        device: null,
        context_per_slot: null,
        message: `no verdict: ${err.message}`,
      };
    chosen = defaults();
  }
  return fitVerdict(chosen, modelPath, deps);
}
