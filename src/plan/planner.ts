import type { Config } from "../config/schema.ts";
import type { Decision, Plan } from "../protocol/plan.ts";
import type { WorkerReport } from "../rpc/client.ts";
import { memoryBudgets, vramOverrideWarnings } from "./decide/budgets.ts";
import { decideContextAndLayers } from "./decide/context-and-layers.ts";
import { devicePlans } from "./decide/devices.ts";
import { fitter } from "./decide/fit.ts";
import { decideFlashAttn } from "./decide/flash-attn.ts";
import { idleSleepDecision } from "./decide/idle-sleep.ts";
import { cacheRequests, decideCacheTypes } from "./decide/kv-cache.ts";
import { decideMemoryFlags } from "./decide/memory-flags.ts";
import { extraArgsDecision, jinjaDecision } from "./decide/passthrough.ts";
import { explainingLeftOut, rpcDevices, rpcPlacement, withRpcDevices } from "./decide/rpc-devices.ts";
import { decideSlots } from "./decide/slots.ts";
import { decideThreads } from "./decide/threads.ts";
import { applyOverrides, type HardwareSnapshot } from "./hardware.ts";
import type { ModelInfo } from "./model.ts";

/**
 * The planner: model + hardware + config → the llama-server launch, with a reason for every
 * choice. Pure (no IO, no clock): each decision lives in `decide/` and is tested alone; this
 * composes them in the order their inputs need and reports them in argv order.
 */

/** The plan's types are inferred from its schema; re-exported here, where they were first defined. */
export type { Decision, DevicePlan, Plan } from "../protocol/plan.ts";

export type PlanConfig = Pick<Config, "model" | "llama" | "hardware"> & {
  app: Pick<Config["app"], "max_parallel_chats">;
};

/** `workers`: the answers of `llama.rpc`'s workers (rpc/check.ts); a worker not among them is left out. */
export function makePlan(
  model: ModelInfo,
  rawHw: HardwareSnapshot,
  config: PlanConfig,
  workers: readonly WorkerReport[] = [],
): Plan {
  const { llama } = config;
  const hw = applyOverrides(rawHw, config.hardware);
  const local = memoryBudgets(hw, config.hardware);
  // RPC workers' devices join the GPUs, in front, as llama-server orders them.
  const rpc = rpcDevices(llama.rpc, workers);
  const budgets = withRpcDevices(local, rpc);
  const warnings = [
    ...model.warnings,
    ...vramOverrideWarnings(config.hardware, rawHw.gpus.length),
    ...rpc.warnings,
  ];

  // Cache types first: the V type decides flash attention, and both shape the estimate.
  const cache = decideCacheTypes(model, cacheRequests(llama));
  const flashAttn = decideFlashAttn(llama.flash_attn, cache.value.v);
  const fit = fitter(model, budgets, {
    cacheK: cache.value.k,
    cacheV: cache.value.v,
    flashAttn: flashAttn.value !== "off",
  });
  const slots = decideSlots(config);

  const placed = explainingLeftOut(rpc, () =>
    decideContextAndLayers({
      model,
      requested: config.model,
      fit,
      gpuBudgets: budgets.gpus.map((g) => g.budget),
      detectedGpus: rawHw.gpus.length + rpc.budgets.length,
      slots: slots.value,
    }),
  );
  warnings.push(...placed.warnings);
  const told = rpcPlacement(rpc, budgets, placed, model.n_layer, local.gpus.length, llama.rpc.length > 0);
  const threads = decideThreads(llama.threads, hw.cpu);
  const memory = decideMemoryFlags(llama);

  const decisions: Decision[] = [
    slots.decision,
    told.context,
    told.gpuLayers,
    ...told.flags,
    threads.decision,
    flashAttn.decision,
    cache.decision,
    memory.decision,
    jinjaDecision(),
    idleSleepDecision(llama),
  ];
  const extra = extraArgsDecision(llama.extra_args);
  if (extra) decisions.push(extra);

  return {
    model_path: model.path,
    slots: slots.value,
    context_per_slot: placed.context.value,
    context_total: placed.context.value * slots.value,
    gpu_layers: placed.gpuLayers.value.layers,
    gpu_layers_all: placed.gpuLayers.value.all,
    threads: threads.value,
    flash_attn: flashAttn.value,
    cache_type_k: cache.value.k,
    cache_type_v: cache.value.v,
    mmap: llama.mmap,
    mlock: llama.mlock,
    max_tokens: config.model.max_tokens,
    devices: devicePlans(budgets, placed.trial.est, hw.cpu.model),
    workers: rpc.workers,
    decisions,
    // extra_args come last, after every planned flag, so they win.
    argv: ["-m", model.path, ...decisions.flatMap((d) => d.flags)],
    warnings,
  };
}
