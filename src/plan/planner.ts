import { CoreError } from "../protocol/errors.ts";
import type { Decision, DevicePlan, Plan } from "../protocol/plan.ts";
import type { WorkerReport } from "../rpc/client.ts";
import { hardwareWarnings, memoryBudgets } from "./decide/budgets.ts";
import { decideCacheRam } from "./decide/cache-ram.ts";
import { chatTemplateReport, type TemplateFile } from "./decide/chat-template.ts";
import { decideContextAndLayers } from "./decide/context-and-layers.ts";
import type { Decided } from "./decide/decided.ts";
import { devicePlans } from "./decide/devices.ts";
import { fitter } from "./decide/fit.ts";
import { decideFlashAttn } from "./decide/flash-attn.ts";
import { idleSleepDecision } from "./decide/idle-sleep.ts";
import { type CacheTypes, cacheRequests, decideCacheTypes } from "./decide/kv-cache.ts";
import { decideMemoryFlags } from "./decide/memory-flags.ts";
import { decideOffloadDevices } from "./decide/offload-devices.ts";
import { extraArgsDecision, extraArgsWarnings, jinjaDecision } from "./decide/passthrough.ts";
import { imagesOf, placeProjector, withProjector } from "./decide/projector.ts";
import { explainingLeftOut, rpcDevices, rpcPlacement, withRpcDevices } from "./decide/rpc-devices.ts";
import { decideSlotSave } from "./decide/slot-save.ts";
import { decideSlots } from "./decide/slots.ts";
import { decideThreads } from "./decide/threads.ts";
import { planEmbedding } from "./embedding-planner.ts";
import { applyOverrides, type HardwareSnapshot } from "./hardware.ts";
import type { LaunchPlan } from "./launch-plan.ts";
import { type ModelInfo, notAModel } from "./model.ts";
import type { PlanConfig, Planned } from "./plan-config.ts";
import type { ProjectorChoice } from "./projector.ts";
import { reportOf } from "./report-of.ts";

/**
 * The planner: model + hardware + config → the llama-server launch, with a reason for every
 * choice. Pure (no IO, no clock): each decision lives in `decide/` and is tested alone; this
 * composes them in the order their inputs need into the launch plan (launch-plan.ts) and the
 * report that explains it, in argv order.
 */

/** The plan's types are inferred from its schema; re-exported here, where they were first defined. */
export type { Decision, DevicePlan, Plan } from "../protocol/plan.ts";

export type { PlanConfig, Planned } from "./plan-config.ts";

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
  /** The vision projector found for the model (models/find-projector.ts); absent: none looked for. */
  projector: ProjectorChoice = { kind: "none", reason: "no projector was looked for" },
): Planned {
  const refused = notAModel(model);
  if (refused)
    throw new CoreError("model_plan_error", refused, { path: model.path, architecture: model.architecture });
  // An embedding model is planned by its own composer: no chat context, no KV cache to size.
  if (config.model_kind === "embedding") return planEmbedding(model, rawHw, config);
  return planChat(model, rawHw, config, workers, templateFile, projector);
}

function planChat(
  model: ModelInfo,
  rawHw: HardwareSnapshot,
  config: PlanConfig,
  workers: readonly WorkerReport[],
  templateFile: TemplateFile | undefined,
  projector: ProjectorChoice,
): Planned {
  const { llama } = config;
  const hw = applyOverrides(rawHw, config.hardware);
  const local = memoryBudgets(hw, config.hardware, config.gpu_out_of_memory);
  // RPC workers' devices join the GPUs, in front, as llama-server orders them.
  const rpc = rpcDevices(llama.rpc, workers, local.gpus.length);
  const budgets = withRpcDevices(local, rpc);
  const warnings = [...model.warnings, ...hardwareWarnings(config.hardware, rawHw, config.gpu_out_of_memory)];
  warnings.push(...rpc.warnings, ...extraArgsWarnings(llama.extra_args));
  // Cache types first: the V type decides flash attention, and both shape the estimate.
  const cache = decideCacheTypes(model, cacheRequests(llama));
  const flashAttn = decideFlashAttn(llama.flash_attn, cache.value.v);
  // The projector's bytes are taken from where it is held before the text model is fitted.
  const vision = placeProjector(projector, budgets, flashAttn.value !== "off");
  const fit = fitter(model, vision.budgets, fitOptions(cache.value, flashAttn.value));
  const slots = decideSlots(config);
  const placed = explainingLeftOut(rpc, () =>
    decideContextAndLayers({
      model,
      requested: config.model,
      fit,
      gpuBudgets: vision.budgets.gpus.map((g) => g.budget),
      detectedGpus: rawHw.gpus.length + rpc.budgets.length,
      gpusUnused: rawHw.gpus_unused,
      slots: slots.value,
    }),
  );
  const images = imagesOf(projector, vision.placement, placed.context.value, model.n_embd);
  warnings.push(...vision.warnings, ...placed.warnings, ...images.warnings);
  const told = rpcPlacement(rpc, budgets, placed, model.n_layer, local.gpus.length, llama.rpc.length > 0);
  const offload = decideOffloadDevices(hw, placed.gpuLayers.value.layers, rpc.used.length);
  const threads = decideThreads(llama.threads, hw.cpu);
  const memory = decideMemoryFlags(llama);
  const template = chatTemplateReport(model.chat_template, llama.extra_args, templateFile);
  const devices = withProjector(devicePlans(budgets, placed.trial.est, hw.cpu.model), vision.placement);
  const reuse = reuseDecisions(devices, config);

  const launch = launchOf(model, config, {
    slots: slots.value,
    context: placed.context.value,
    gpuLayers: placed.gpuLayers.value.layers,
    devices: offload.value,
    rpcWorkers: rpc.used,
    tensorSplit: told.tensorSplit,
    threads: threads.value,
    flashAttn: flashAttn.value,
    cache: cache.value,
    memory: memory.value,
    thinking: template.thinking,
    reuse,
    mmproj: images.launch,
  });
  const decisions = inArgvOrder(
    llama,
    [
      slots.decision,
      told.context,
      told.gpuLayers,
      ...(offload.decision ? [offload.decision] : []),
      ...told.flags,
      threads.decision,
      flashAttn.decision,
      cache.decision,
      memory.decision,
      ...images.decisions,
    ],
    reuse,
  );
  const { workers: planned } = rpc;
  const shown = { all: placed.gpuLayers.value.all, devices: reuse.devices, workers: planned, template };
  return { launch, plan: reportOf(launch, { ...shown, projector: images.report }, decisions, warnings) };
}

/**
 * The decisions in argv order (the report's lines and argv are one rendering, argv.ts): the
 * planned ones, then --jinja, idle sleep, the RAM prompt cache and the slot folder, and
 * extra_args last.
 */
function inArgvOrder(llama: PlanConfig["llama"], planned: Decision[], reuse: Reuse): Decision[] {
  const extra = extraArgsDecision(llama.extra_args);
  const tail = [idleSleepDecision(llama), reuse.cacheRam.decision, reuse.slotSave.decision];
  return [...planned, jinjaDecision(), ...tail, ...(extra ? [extra] : [])];
}

/** What the estimate takes of the cache and attention decisions. */
function fitOptions(cache: CacheTypes, flashAttn: LaunchPlan["flash_attn"]) {
  return { cacheK: cache.k, cacheV: cache.v, flashAttn: flashAttn !== "off" };
}

/** The values decided for a launch, by name. */
interface Chosen {
  slots: number;
  context: number;
  gpuLayers: number;
  devices: string[] | null;
  rpcWorkers: string[];
  tensorSplit: number[] | null;
  threads: number;
  flashAttn: LaunchPlan["flash_attn"];
  cache: CacheTypes;
  memory: Pick<LaunchPlan, "mmap" | "mlock">;
  thinking: boolean | null;
  reuse: Reuse;
  mmproj: LaunchPlan["mmproj"];
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
    devices: c.devices,
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
    cache_ram_mib: c.reuse.cacheRam.value,
    slot_save_path: c.reuse.slotSave.value,
    extra_args: [...config.llama.extra_args],
    thinking: c.thinking,
    mmproj: c.mmproj,
  };
}

/**
 * What prompt reuse takes (docs/agent.md#prompt-reuse): the RAM prompt cache, the slot folder, and
 * the devices with the former.
 */
interface Reuse {
  devices: DevicePlan[];
  cacheRam: Decided<number>;
  slotSave: Decided<string | null>;
}

/**
 * The RAM prompt cache, sized from what the placed launch leaves of RAM, as its own line of the
 * CPU's memory (host RAM; the GPUs hold none), and the slot folder.
 */
function reuseDecisions(placed: DevicePlan[], config: PlanConfig): Reuse {
  const cacheRam = decideCacheRam({
    ramLeftBytes: placed.find((d) => d.kind === "cpu")?.free_after_bytes ?? 0,
    kvBytes: placed.reduce((a, d) => a + d.usage.kv_cache, 0),
  });
  const bytes = cacheRam.value * 1024 * 1024;
  const devices = placed.map((d) =>
    d.kind === "cpu"
      ? {
          ...d,
          usage: { ...d.usage, cache_ram: bytes, total: d.usage.total + bytes },
          free_after_bytes: d.free_after_bytes - bytes,
        }
      : d,
  );
  return { devices, cacheRam, slotSave: decideSlotSave(config.llama, config.app.data_dir) };
}
