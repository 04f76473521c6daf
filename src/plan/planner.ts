import type { Config } from "../config/schema.ts";
import type { ChatTemplateReport, Decision, DevicePlan, Plan, WorkerPlan } from "../protocol/plan.ts";
import type { WorkerReport } from "../rpc/client.ts";
import { PLAN_DIALECT, renderArgv } from "./argv.ts";
import { memoryBudgets, vramOverrideWarnings } from "./decide/budgets.ts";
import { chatTemplateReport, type TemplateFile } from "./decide/chat-template.ts";
import { decideContextAndLayers } from "./decide/context-and-layers.ts";
import { devicePlans } from "./decide/devices.ts";
import { fitter } from "./decide/fit.ts";
import { decideFlashAttn } from "./decide/flash-attn.ts";
import { idleSleepDecision } from "./decide/idle-sleep.ts";
import { type CacheTypes, cacheRequests, decideCacheTypes } from "./decide/kv-cache.ts";
import { decideMemoryFlags } from "./decide/memory-flags.ts";
import { extraArgsDecision, jinjaDecision } from "./decide/passthrough.ts";
import { explainingLeftOut, rpcDevices, rpcPlacement, withRpcDevices } from "./decide/rpc-devices.ts";
import { decideSlots } from "./decide/slots.ts";
import { decideThreads } from "./decide/threads.ts";
import { applyOverrides, type HardwareSnapshot } from "./hardware.ts";
import type { LaunchPlan } from "./launch-plan.ts";
import type { ModelInfo } from "./model.ts";

/**
 * The planner: model + hardware + config → the llama-server launch, with a reason for every
 * choice. Pure (no IO, no clock): each decision lives in `decide/` and is tested alone; this
 * composes them in the order their inputs need into the launch plan (launch-plan.ts) and the
 * report that explains it, in argv order.
 */

/** The plan's types are inferred from its schema; re-exported here, where they were first defined. */
export type { Decision, DevicePlan, Plan } from "../protocol/plan.ts";

export type PlanConfig = Pick<Config, "model" | "llama" | "hardware"> & {
  app: Pick<Config["app"], "max_parallel_chats">;
};

/** The launch, and the report that explains it (its argv rendered from the launch). */
export interface Planned {
  launch: LaunchPlan;
  plan: Plan;
}

/** `workers`: the answers of `llama.rpc`'s workers (rpc/check.ts); a worker not among them is left out. */
export function makePlan(
  model: ModelInfo,
  rawHw: HardwareSnapshot,
  config: PlanConfig,
  workers: readonly WorkerReport[] = [],
): Plan {
  return planFor(model, rawHw, config, workers).plan;
}

export function planFor(
  model: ModelInfo,
  rawHw: HardwareSnapshot,
  config: PlanConfig,
  workers: readonly WorkerReport[] = [],
  /** The template file llama.extra_args name, as read (decide/chat-template.ts). */
  templateFile?: TemplateFile,
): Planned {
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
  const template = chatTemplateReport(model.chat_template, llama.extra_args, templateFile);

  const launch = launchOf(model, config, {
    slots: slots.value,
    context: placed.context.value,
    gpuLayers: placed.gpuLayers.value.layers,
    rpcWorkers: rpc.used,
    tensorSplit: told.tensorSplit,
    threads: threads.value,
    flashAttn: flashAttn.value,
    cache: cache.value,
    memory: memory.value,
    thinking: template.thinking,
  });
  const decisions = inArgvOrder(llama, [
    slots.decision,
    told.context,
    told.gpuLayers,
    ...told.flags,
    threads.decision,
    flashAttn.decision,
    cache.decision,
    memory.decision,
  ]);
  const devices = devicePlans(budgets, placed.trial.est, hw.cpu.model);
  return {
    launch,
    plan: reportOf(
      launch,
      { all: placed.gpuLayers.value.all, devices, workers: rpc.workers, template },
      decisions,
      warnings,
    ),
  };
}

/**
 * The decisions in argv order (the report's lines and argv are one rendering, argv.ts): the
 * planned ones, then --jinja, idle sleep and extra_args last.
 */
function inArgvOrder(llama: PlanConfig["llama"], planned: Decision[]): Decision[] {
  const extra = extraArgsDecision(llama.extra_args);
  return [...planned, jinjaDecision(), idleSleepDecision(llama), ...(extra ? [extra] : [])];
}

/** The values decided for a launch, by name. */
interface Chosen {
  slots: number;
  context: number;
  gpuLayers: number;
  rpcWorkers: string[];
  tensorSplit: number[] | null;
  threads: number;
  flashAttn: LaunchPlan["flash_attn"];
  cache: CacheTypes;
  memory: Pick<LaunchPlan, "mmap" | "mlock">;
  thinking: boolean | null;
}

/** The launch plan: the decided values, and what the config passes through as it is. */
function launchOf(model: ModelInfo, config: PlanConfig, c: Chosen): LaunchPlan {
  return {
    model_path: model.path,
    model_name: model.name,
    model_bytes: model.size_bytes,
    slots: c.slots,
    context_per_slot: c.context,
    max_tokens: config.model.max_tokens,
    gpu_layers: c.gpuLayers,
    rpc_workers: c.rpcWorkers,
    tensor_split: c.tensorSplit,
    threads: c.threads,
    flash_attn: c.flashAttn,
    cache_type_k: c.cache.k,
    cache_type_v: c.cache.v,
    mmap: c.memory.mmap,
    mlock: c.memory.mlock,
    jinja: true,
    idle_sleep_s: config.llama.idle_sleep_s,
    extra_args: [...config.llama.extra_args],
    thinking: c.thinking,
  };
}

/** The plan report: the launch's values, how each was decided, and the argv they render to. */
function reportOf(
  launch: LaunchPlan,
  placed: { all: boolean; devices: DevicePlan[]; workers: WorkerPlan[]; template: ChatTemplateReport },
  decisions: Decision[],
  warnings: string[],
): Plan {
  const { devices, workers } = placed;
  return {
    model_path: launch.model_path,
    slots: launch.slots,
    context_per_slot: launch.context_per_slot,
    context_total: launch.context_per_slot * launch.slots,
    gpu_layers: launch.gpu_layers,
    gpu_layers_all: placed.all,
    threads: launch.threads,
    flash_attn: launch.flash_attn,
    cache_type_k: launch.cache_type_k,
    cache_type_v: launch.cache_type_v,
    mmap: launch.mmap,
    mlock: launch.mlock,
    max_tokens: launch.max_tokens,
    devices,
    workers,
    decisions,
    argv: renderArgv(launch, PLAN_DIALECT),
    chat_template: placed.template,
    warnings,
  };
}
