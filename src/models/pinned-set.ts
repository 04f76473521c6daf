import { configForModel, configuredModels } from "../config/model-entry.ts";
import type { Config } from "../config/schema.ts";
import { heldOnDevice } from "../plan/decide/devices.ts";
import { type PlanDeps, planInputs } from "../plan/launch.ts";
import type { DevicePlan } from "../plan/planner.ts";
import { formatBytes } from "../plan/render.ts";

/**
 * Pinned models are never unloaded to make room (docs/models.md "Several models"), so a pinned set that alone
 * exceeds the budget can never be loaded together. Which models are pinned is in the config,
 * but what each costs is its plan's (I/O: its header, the machine), so the check is made where
 * plans are made: doctor fails it, `plan` warns, and the runtime asks `pinnedSetProblem` before
 * its first load (docs/models.md, "Several models").
 */

/** A device the pinned models overrun together (the shape of the scheduler's `DeviceShortfall`). */
export interface PinnedShortfall {
  device: string;
  needed_bytes: number;
  budget_bytes: number;
}

export interface PinnedSetProblem {
  /** The pinned models that take memory on the devices they overrun, in config order. */
  models: string[];
  devices: PinnedShortfall[];
  /**
   * Which of `devices` are RPC workers, counted whole for each model (`heldOnDevice`): no smaller
   * context or quantization makes two fit there, which the message and doctor's fix must say.
   */
  workers?: string[];
}

/**
 * Pure: the pinned models' plans (each made as if it were alone) held together against the
 * budget: per device the sum of what each holds there (`usage.total`; an RPC worker's device
 * whole, as the scheduler counts it: `heldOnDevice`) against its `budget_bytes`. Each plan probed
 * the machine on its own, so a device's budget is the smallest any of them saw.
 */
export function pinnedPlansProblem(
  planned: readonly { name: string; devices: readonly DevicePlan[] }[],
): PinnedSetProblem | null {
  const used = new Map<string, number>();
  const budget = new Map<string, number>();
  for (const { devices } of planned) {
    for (const d of devices) {
      used.set(d.id, (used.get(d.id) ?? 0) + heldOnDevice(d));
      budget.set(d.id, Math.min(budget.get(d.id) ?? d.budget_bytes, d.budget_bytes));
    }
  }
  const devices = [...used]
    .filter(([id, bytes]) => bytes > (budget.get(id) ?? 0))
    .map(([device, needed_bytes]) => ({ device, needed_bytes, budget_bytes: budget.get(device) ?? 0 }));
  if (devices.length === 0) return null;
  const over = new Set(devices.map((d) => d.device));
  const models = planned
    .filter((p) => p.devices.some((d) => over.has(d.id) && heldOnDevice(d) > 0))
    .map((p) => p.name);
  const workers = [
    ...new Set(
      planned.flatMap((p) => p.devices.filter((d) => d.kind === "rpc" && over.has(d.id)).map((d) => d.id)),
    ),
  ];
  return { models, devices, ...(workers.length > 0 ? { workers } : {}) };
}

/** The names of the pinned models, in config order (`default` is never pinned). */
export function pinnedNames(config: Config): string[] {
  return configuredModels(config)
    .filter((m) => m.pin)
    .map((m) => m.name);
}

/**
 * Plans each pinned model as if it were alone and holds them together against the budget; null
 * when they fit or fewer than two are pinned (one that plans at all fits alone). A pinned model
 * that cannot be planned is left out: its own plan's error says why.
 */
export async function pinnedSetProblem(config: Config, deps: PlanDeps): Promise<PinnedSetProblem | null> {
  const names = pinnedNames(config);
  if (names.length < 2) return null;
  const planned = await Promise.all(
    names.map(async (name) => {
      try {
        const { plan } = await planInputs(configForModel(config, name)!, deps);
        return [{ name, devices: plan.devices }];
      } catch {
        return [];
      }
    }),
  );
  return pinnedPlansProblem(planned.flat());
}

/** One line naming the models and each device they overrun. */
export function pinnedSetMessage(problem: PinnedSetProblem): string {
  const devices = problem.devices.map((d) =>
    problem.workers?.includes(d.device)
      ? `${d.device} is an RPC worker, which serves one model at a time, and each of their plans uses it`
      : `${d.device} needs ${formatBytes(d.needed_bytes)} of its ${formatBytes(d.budget_bytes)}`,
  );
  return `the pinned models ${problem.models.join(", ")} cannot stay loaded together: ${devices.join("; ")}`;
}
