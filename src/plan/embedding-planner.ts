import { CoreError } from "../protocol/errors.ts";
import type { ChatTemplateReport, Decision } from "../protocol/plan.ts";
import { flags } from "./argv.ts";
import { hardwareWarnings, memoryBudgets } from "./decide/budgets.ts";
import { devicePlans } from "./decide/devices.ts";
import { decideEmbedding, type EmbeddingLaunch } from "./decide/embedding.ts";
import { placeEmbedding } from "./decide/embedding-devices.ts";
import { decideFlashAttn } from "./decide/flash-attn.ts";
import { idleSleepDecision } from "./decide/idle-sleep.ts";
import { decideMemoryFlags } from "./decide/memory-flags.ts";
import { decideOffloadDevices } from "./decide/offload-devices.ts";
import { extraArgsDecision, extraArgsWarnings } from "./decide/passthrough.ts";
import { decideThreads } from "./decide/threads.ts";
import { applyOverrides, type HardwareSnapshot } from "./hardware.ts";
import type { LaunchPlan } from "./launch-plan.ts";
import type { ModelInfo } from "./model.ts";
import type { PlanConfig, Planned } from "./plan-config.ts";
import { reportOf } from "./report-of.ts";

/**
 * The plan of a model of kind embedding (docs/plan.md "Embedding models"): `decideEmbedding`'s
 * pooling, batch, slots and memory (weights and a compute buffer, no KV cache for an encoder, no
 * RAM prompt cache), placed on one device (decide/embedding-devices.ts), threads, flash attention
 * and the weights' holding as a chat model's; no KV cache types, no `--jinja`, no slot folder.
 * A chat model's planner would give it a chat's context and KV cache, and llama-server started
 * so refused it (issue 28: tiny-embed aborted). Pure, as planner.ts is.
 */

/** An embedding model is never chatted with: its template, if any, is not applied. */
const NO_TEMPLATE: ChatTemplateReport = {
  source: "none",
  thinking: false,
  reason: "an embedding model is not chatted with: no chat template is applied",
};

export function planEmbedding(model: ModelInfo, rawHw: HardwareSnapshot, config: PlanConfig): Planned {
  const { llama } = config;
  const hw = applyOverrides(rawHw, config.hardware);
  const budgets = memoryBudgets(hw, config.hardware, config.gpu_out_of_memory);
  const context = config.model.context;
  const place = (e: EmbeddingLaunch) =>
    placeEmbedding(model, e.memory, budgets, config.model.gpu_layers, rawHw.gpus.length, rawHw.gpus_unused);
  const { e, placed } = fitted(model, typeof context === "number" ? context : undefined, place);
  // The chat estimator's "architecture not known" does not hold for an encoder: its memory is
  // decideEmbedding's, checked against tiny-embed's log (recording 119).
  const known = e.causal ? model.warnings : model.warnings.filter((w) => !w.startsWith("architecture '"));
  const warnings = [
    ...known,
    ...hardwareWarnings(config.hardware, rawHw, config.gpu_out_of_memory),
    ...extraArgsWarnings(llama.extra_args),
  ];
  if (llama.rpc.length > 0)
    warnings.push("an embedding model runs on this machine: llama.rpc's workers are not used");
  if (typeof context !== "number" && e.batch < model.context_train)
    warnings.push(
      `the embedding model takes inputs of up to ${e.batch} tokens here, not its ${model.context_train}: a batch that long did not fit this machine's memory (a longer input is refused naming it; model.context asks for a length)`,
    );
  const offload = decideOffloadDevices(hw, placed.gpuLayers.value.layers, 0);
  const threads = decideThreads(llama.threads, hw.cpu);
  const flashAttn = decideFlashAttn(llama.flash_attn, "f16");
  const memory = decideMemoryFlags(llama);
  const launch: LaunchPlan = {
    model_path: model.path,
    model_name: model.name,
    model_bytes: model.size_bytes,
    slots: e.slots,
    context_per_slot: e.batch,
    max_tokens: null,
    gpu_layers: placed.gpuLayers.value.layers,
    devices: offload.value,
    rpc_workers: [],
    tensor_split: placed.tensorSplit,
    threads: threads.value,
    flash_attn: flashAttn.value,
    // llama-server's own, never rendered (argv.ts): there is no cache to quantize.
    cache_type_k: "f16",
    cache_type_v: "f16",
    mmap: memory.value.mmap,
    mlock: memory.value.mlock,
    jinja: false,
    idle_sleep_s: llama.idle_sleep_s,
    cache_ram_mib: 0,
    slot_save_path: null,
    extra_args: [...llama.extra_args],
    thinking: false,
    embedding: { pooling: e.pooling, batch: e.batch, causal: e.causal },
  };
  const extra = extraArgsDecision(llama.extra_args);
  const decisions: Decision[] = [
    ...shapeDecisions(e),
    placed.gpuLayers.decision,
    ...(offload.decision ? [offload.decision] : []),
    ...(placed.tensorSplit ? [tensorSplitDecision(placed.tensorSplit)] : []),
    threads.decision,
    flashAttn.decision,
    memory.decision,
    idleSleepDecision(llama),
    cacheRamDecision(e),
    ...(extra ? [extra] : []),
  ];
  const devices = devicePlans(budgets, placed.estimate, hw.cpu.model);
  return {
    launch,
    plan: reportOf(
      launch,
      { all: placed.gpuLayers.value.all, devices, workers: [], template: NO_TEMPLATE },
      decisions,
      warnings,
    ),
  };
}

/** The shortest longest-input the planner halves down to before it calls the model unfit. */
const MIN_FITTED_TOKENS = 512;

/**
 * The model's positions as the longest input, halved while the plan does not fit the machine
 * (a decoder embedder of 32,768 positions wants ~15 GiB of KV cache for four slots, and an
 * input that long is rare): down to MIN_FITTED_TOKENS. A length the config asks for
 * (`model.context`) is kept, fitting or not.
 */
function fitted(
  model: ModelInfo,
  asked: number | undefined,
  place: (e: EmbeddingLaunch) => ReturnType<typeof placeEmbedding>,
) {
  for (
    let tokens = asked ?? model.context_train;
    ;
    tokens = Math.max(MIN_FITTED_TOKENS, Math.floor(tokens / 2))
  ) {
    const e = decideEmbedding({ model, maxInputTokens: tokens });
    try {
      return { e, placed: place(e) };
    } catch (err) {
      const planError = err instanceof CoreError && err.code === "model_plan_error";
      if (asked !== undefined || !planError || e.batch <= MIN_FITTED_TOKENS) throw err;
    }
  }
}

/** Slots, the context they share and the embedding flags, in argv order, with decideEmbedding's reasons. */
function shapeDecisions(e: EmbeddingLaunch): Decision[] {
  const [pooling, batch, cache] = e.reasons;
  return [
    {
      name: "slots",
      value: e.slots,
      source: "auto",
      flags: flags.slots(e.slots),
      reason: `${e.slots} inputs embedded at once, llama-server's own number for an embedding model (recording 119)`,
    },
    {
      name: "context",
      value: e.batch,
      source: "auto",
      flags: flags.context(e.batch, e.slots),
      reason: "each slot holds one whole input: the batch",
    },
    {
      name: "embedding",
      value: e.pooling,
      source: "auto",
      flags: [...flags.embeddings(e.pooling), ...flags.batch(e.batch)],
      reason: [pooling, batch, cache].join("; "),
    },
  ];
}

function tensorSplitDecision(shares: number[]): Decision {
  return {
    name: "tensor_split",
    value: shares.join(","),
    source: "auto",
    flags: flags.tensorSplit(shares),
    reason: "the embedding model is small: it runs whole on the first GPU",
  };
}

function cacheRamDecision(e: EmbeddingLaunch): Decision {
  return { name: "cache_ram", value: 0, source: "auto", flags: flags.cacheRam(0), reason: e.reasons[3]! };
}
