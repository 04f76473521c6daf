import type { Config } from "../config/schema.ts";
import { memoryBudgets, vramOverrideWarnings } from "./decide/budgets.ts";
import { capContext, chooseContext, decideContext } from "./decide/context.ts";
import { devicePlans } from "./decide/devices.ts";
import { fitter } from "./decide/fit.ts";
import { decideFlashAttn } from "./decide/flash-attn.ts";
import { decideGpuLayers, explicitGpuLayers, mostGpuLayers } from "./decide/gpu-layers.ts";
import { decideCacheTypes } from "./decide/kv-cache.ts";
import { decideMemoryFlags } from "./decide/memory-flags.ts";
import { extraArgsDecision, jinjaDecision } from "./decide/passthrough.ts";
import { decideSlots } from "./decide/slots.ts";
import { decideThreads } from "./decide/threads.ts";
import { applyOverrides, type HardwareSnapshot } from "./hardware.ts";
import type { ModelInfo } from "./model.ts";
import type { Decision, Plan } from "./report-schema.ts";

/**
 * The planner: model + hardware + config → the llama-server launch, with a reason for every
 * choice. Pure (no IO, no clock): each decision lives in `decide/` and is tested alone; this
 * composes them in the order their inputs need and reports them in argv order.
 */

export type PlanConfig = Pick<Config, "model" | "llama" | "hardware"> & {
  app: Pick<Config["app"], "max_parallel_chats">;
};

export function makePlan(model: ModelInfo, rawHw: HardwareSnapshot, config: PlanConfig): Plan {
  const { llama } = config;
  const hw = applyOverrides(rawHw, config.hardware);
  const budgets = memoryBudgets(hw, config.hardware);
  const warnings = [...model.warnings, ...vramOverrideWarnings(config.hardware, rawHw.gpus.length)];

  // Cache types first: the V type decides flash attention, and both shape the estimate.
  const cache = decideCacheTypes(model, llama);
  const flashAttn = decideFlashAttn(llama.flash_attn, cache.value.v);
  const fit = fitter(model, budgets, {
    cacheK: cache.value.k,
    cacheV: cache.value.v,
    flashAttn: flashAttn.value !== "off",
  });
  const slots = decideSlots(config);

  const maxNgl = model.n_layer + 1;
  const capped = capContext(config.model.context, model.context_train);
  warnings.push(...capped.warnings);
  const explicitNgl = explicitGpuLayers(
    config.model.gpu_layers,
    maxNgl,
    budgets.gpus.length,
    rawHw.gpus.length,
  );
  const gpuBudgets = budgets.gpus.map((g) => g.budget);
  const chosen = chooseContext(
    {
      fit,
      layersFor: (ctx) => explicitNgl ?? mostGpuLayers(fit, gpuBudgets, maxNgl, ctx, slots.value),
      slots: slots.value,
      train: model.context_train,
      maxNgl,
      gpus: budgets.gpus.length > 0,
      explicitNgl,
      architecture: model.architecture,
    },
    capped.ctx,
  );
  warnings.push(...chosen.warnings);
  const context = decideContext(chosen, model.context_train, slots.value, capped.ctx !== null);
  const layers = decideGpuLayers(chosen.ngl, model.n_layer, budgets.gpus.length, explicitNgl !== null);
  const threads = decideThreads(llama.threads, hw.cpu);
  const memory = decideMemoryFlags(llama);

  const decisions: Decision[] = [
    slots.decision,
    context.decision,
    layers.decision,
    threads.decision,
    flashAttn.decision,
    cache.decision,
    memory.decision,
    jinjaDecision(),
  ];
  const extra = extraArgsDecision(llama.extra_args);
  if (extra) decisions.push(extra);

  return {
    model_path: model.path,
    slots: slots.value,
    context_per_slot: context.value,
    context_total: context.value * slots.value,
    gpu_layers: layers.value.layers,
    gpu_layers_all: layers.value.all,
    threads: threads.value,
    flash_attn: flashAttn.value,
    cache_type_k: cache.value.k,
    cache_type_v: cache.value.v,
    mmap: llama.mmap,
    mlock: llama.mlock,
    max_tokens: config.model.max_tokens,
    devices: devicePlans(budgets, chosen.trial.est, hw.cpu.model),
    decisions,
    // extra_args come last, after every planned flag, so they win.
    argv: ["-m", model.path, ...decisions.flatMap((d) => d.flags)],
    warnings,
  };
}
