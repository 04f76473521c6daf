import { createHash } from "node:crypto";
import type { PromptReuse } from "../agent/kv/reuse.ts";
import { configForModel, type ModelConfig, modelConfig } from "../config/model-entry.ts";
import { DEFAULT_MODEL_NAME } from "../config/model-schema.ts";
import type { Config } from "../config/schema.ts";
import { defaultPlanDeps } from "../models/local-plan-deps.ts";
import { heldOnDevice } from "../plan/decide/devices.ts";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import type { LaunchPlan, PlanDeps } from "../plan/launch.ts";
import type { DevicePlan } from "../protocol/plan.ts";
import { MAX_OUT_OF_MEMORY, START_FAILURE_HOLD_MS } from "../runtime/launcher.ts";
import type { DeviceBytes } from "../runtime/memory-fit.ts";
import type { ModelFootprint, ModelRuntime } from "../runtime/model-runtime.ts";
import { createSupervisor, withHint } from "../runtime/provider.ts";
import type { StartFailure, StartFailureSlot } from "../runtime/supervisor-options.ts";

/**
 * One model's runtime, made by the scheduler's factory (docs/supervisor.md "Scheduling several
 * models"): today's supervisor over `configForModel`, its own log and pid record, its plan's bytes,
 * and its prompt reuse's save before an unload.
 */

export interface RuntimeDeps {
  config(): Config;
  /** What the other models hold now per device, by their plans (the scheduler's view). */
  heldByOthers(model: string): DeviceBytes[];
  /** The model's prompt reuse, which outlives its runtimes (a model unloaded comes back). */
  reuse(model: string): PromptReuse;
  /** A path model's file by its own name, where its name is a link's target (choose-model.ts). */
  file?(model: string): string | undefined;
  /**
   * Starts of each model that ran out of GPU memory, kept across its runtimes (a model unloaded
   * and loaded again is a new one): its next plan, the scheduler's included, keeps that much
   * more of the GPU free rather than running out once more. Absent: this runtime's own only.
   */
  outOfMemory?: Map<string, number>;
  /**
   * Each model's last start that failed once spawned (runtime/launcher.ts `holdBack`), kept across
   * its runtimes: the scheduler makes a new one for each load after a failed one, and each chat
   * would otherwise pay the whole load again for the same error. Absent: this runtime's own only.
   */
  startFailures?: Map<string, StartFailure>;
  /** Plans a model (the chat planner, or the embedding one for a model of kind embedding). */
  plan(
    config: ModelConfig,
    deps: PlanDeps,
  ): Promise<{ plan: { devices: readonly DevicePlan[] }; launch: LaunchPlan }>;
}

/**
 * The name in its log's and pid record's file names: none for `default` (today's names), the
 * configured name, or a digest for a path (which may hold any character).
 */
export function instanceOf(config: Config, name: string): string | undefined {
  if (name === DEFAULT_MODEL_NAME) return undefined;
  if (configForModel(config, name)) return name;
  return `path-${createHash("sha256").update(name).digest("hex").slice(0, 12)}`;
}

/**
 * The machine as it would be with none of the core's models loaded: the memory available now
 * plus what the others' plans hold, so the scheduler, which counts them itself, does not count
 * them twice. RPC devices are asked of their workers, which report their own.
 */
export function addBack(hw: HardwareSnapshot, held: readonly DeviceBytes[]): HardwareSnapshot {
  let ram = hw.ram;
  const gpus = hw.gpus.map((g) => ({ ...g }));
  for (const bytes of held) {
    for (const [device, n] of Object.entries(bytes)) {
      if (device === "cpu" && ram.available_bytes !== null)
        ram = { ...ram, available_bytes: Math.min(ram.total_bytes, ram.available_bytes + n) };
      const gpu = /^gpu(\d+)$/.exec(device);
      const g = gpu ? gpus[Number(gpu[1])] : undefined;
      if (g) g.free_bytes = Math.min(g.total_bytes, g.free_bytes + n);
    }
  }
  return { ...hw, ram, gpus };
}

/** The core's plan edges, the machine probed as if `held` were not loaded (see `addBack`). */
export function planDepsBeside(held: () => readonly DeviceBytes[]): PlanDeps {
  return {
    ...defaultPlanDeps,
    probe: async (binary) => addBack(await defaultPlanDeps.probe(binary), held()),
  };
}

export function makeModelRuntime(name: string, deps: RuntimeDeps): ModelRuntime {
  // Read once: the file the model was asked by when this runtime (one load) began.
  const file = deps.file?.(name);
  const config = () => modelConfig(deps.config(), name, file);
  const planDeps = planDepsBeside(() => deps.heldByOthers(name));
  // Its runtimes before this one ran out so often; this one's own are the supervisor's hint. At
  // most MAX_OUT_OF_MEMORY margins over all its loads: a cause that has gone since (another
  // program's GPU memory) must not leave the model on ever fewer layers for the core's life.
  const before = deps.outOfMemory?.get(name) ?? 0;
  const counted = (own: number) => Math.min(before + own, MAX_OUT_OF_MEMORY);
  // The plan made for the scheduler's decision is the first launch's; a restart plans anew.
  let planned: LaunchPlan | undefined;
  // What the plan of the server running now holds per device: a replan after a start that ran out
  // of GPU memory holds fewer GPU bytes (and more RAM) than the plan the scheduler admitted.
  let held: DeviceBytes | undefined;
  const failures = deps.startFailures;
  const supervisor = createSupervisor(config, {
    instance: instanceOf(deps.config(), name),
    ...(failures ? { startFailure: failureSlot(failures, name) } : {}),
    plan: async (hint) => {
      const launch = planned;
      planned = undefined;
      // After a start that ran out of GPU memory, the scheduler's plan is not the one to launch.
      if (launch && hint.outOfMemory === 0) return launch;
      const outOfMemory = counted(hint.outOfMemory);
      if (hint.outOfMemory > 0) deps.outOfMemory?.set(name, outOfMemory);
      const made = await deps.plan(withHint(config(), { outOfMemory }), planDeps);
      held = footprintOf(made.plan.devices).bytes;
      return made.launch;
    },
  });
  return {
    acquire: (signal, onProgress, options) => supervisor.acquire(signal, onProgress, options),
    ready: (signal, onProgress, options) => supervisor.ready(signal, onProgress, options),
    prestart: () => supervisor.prestart(),
    asked: () => supervisor.asked(),
    connectAhead: () => supervisor.connectAhead(),
    readsImages: () => supervisor.readsImages(),
    slots: () => supervisor.slots(),
    // Its loads before this one count too: the margin the plan keeps is theirs and its own.
    snapshot: () => {
      const snap = supervisor.snapshot();
      return { ...snap, outOfMemoryStarts: counted(snap.outOfMemoryStarts) };
    },
    // What it held is free once it is gone: the supervisor tells the shared probe (provider.ts).
    stop: (options) => supervisor.stop(options),
    plannedBytes: async (): Promise<ModelFootprint> => {
      const { plan, launch } = await deps.plan(withHint(config(), { outOfMemory: before }), planDeps);
      planned = launch;
      const footprint = footprintOf(plan.devices);
      held = footprint.bytes;
      return footprint;
    },
    checkHold: (explicit) => (planned ? supervisor.checkHold(planned, explicit) : Promise.resolve()),
    heldBytes: () => held,
    beforeUnload: (stopped) => deps.reuse(name).saveBeforeUnload(stopped),
  };
}

/** A plan's bytes per device (its `usage.total`) and each device's budget. */
function footprintOf(devices: readonly DevicePlan[]): ModelFootprint {
  const bytes: Record<string, number> = {};
  const budget: Record<string, number> = {};
  for (const d of devices) {
    // An RPC worker's device whole: no other model is admitted on it (heldOnDevice).
    const total = heldOnDevice(d);
    if (total > 0) bytes[d.id] = total;
    budget[d.id] = d.budget_bytes;
  }
  return { bytes, budget };
}

/**
 * A model's entry of `startFailures`. One set drops those whose hold is over: a path a chat named
 * once, that failed, is not kept for the core's life.
 */
function failureSlot(failures: Map<string, StartFailure>, name: string): StartFailureSlot {
  return {
    get: () => failures.get(name),
    set: (failure) => {
      failures.delete(name);
      if (failure === undefined) return;
      for (const [other, f] of failures)
        if (f.at + START_FAILURE_HOLD_MS <= failure.at) failures.delete(other);
      failures.set(name, failure);
    },
  };
}
