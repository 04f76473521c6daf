import type { Config } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import type { DeviceUsage, Estimate } from "../estimate.ts";
import type { ModelInfo } from "../model.ts";
import type { Budgets } from "./budgets.ts";
import type { Decided } from "./decided.ts";
import type { EmbeddingMemory } from "./embedding.ts";
import { gib } from "./fit.ts";
import { decideGpuLayers, explicitGpuLayers, noGpuReason } from "./gpu-layers.ts";

/**
 * Where an embedding model's bytes go (docs/plan.md "Embedding models"): it is small and its
 * memory does not grow with a context, so it runs whole on one GPU (`-ngl` all: its layers
 * and compute buffer there, the token embeddings looked up on the CPU as a chat model's are) when the first GPU's budget holds it,
 * else on the CPU; `model.gpu_layers` overrides. One GPU only: with several, `--tensor-split`
 * keeps llama-server from spreading a few hundred MiB over all of them.
 */

export interface EmbeddingPlacement {
  estimate: Estimate;
  gpuLayers: Decided<{ layers: number; all: boolean }>;
  /** `--tensor-split` putting everything on the first GPU; null with one GPU or none. */
  tensorSplit: number[] | null;
}

const zero: DeviceUsage = { weights: 0, kv_cache: 0, compute: 0, output: 0, layers: 0, total: 0 };

export function placeEmbedding(
  model: ModelInfo,
  memory: EmbeddingMemory,
  budgets: Budgets,
  requested: Config["model"]["gpu_layers"],
  detectedGpus: number,
  gpusUnused: readonly string[] = [],
): EmbeddingPlacement {
  const all = model.n_layer + 1;
  const explicit = explicitGpuLayers(requested, all, budgets.gpus.length, detectedGpus, gpusUnused);
  const whole = split(model, memory, all);
  const fitsGpu = budgets.gpus.length > 0 && whole.gpu.total <= budgets.gpus[0]!.budget;
  const ngl = explicit ?? (fitsGpu ? all : 0);
  const { cpu, gpu } = ngl === all ? whole : split(model, memory, ngl);
  check("cpu", cpu.total, budgets.ram.budget, model);
  if (ngl > 0) check("gpu0", gpu.total, budgets.gpus[0]!.budget, model);
  const gpus = budgets.gpus.map((_, k) => (k === 0 && ngl > 0 ? gpu : zero));
  return {
    estimate: { cpu, gpus, kv_cells_per_slot: 0, total: memory.total },
    gpuLayers: decision(ngl, model.n_layer, budgets.gpus.length, explicit !== null, gpusUnused),
    tensorSplit: ngl > 0 && budgets.gpus.length > 1 ? budgets.gpus.map((_, k) => (k === 0 ? 1 : 0)) : null,
  };
}

/** `ngl` layers (the last ones, as llama.cpp offloads) and their share of the buffers on the GPU. */
function split(model: ModelInfo, m: EmbeddingMemory, ngl: number): { cpu: DeviceUsage; gpu: DeviceUsage } {
  if (ngl === 0) return { cpu: usage(m.weights, m.kv_cache, m.compute, m.output, model.n_layer), gpu: zero };
  const layers = Math.min(ngl, model.n_layer);
  const offloaded = model.layers.slice(model.n_layer - layers).reduce((a, l) => a + l.weights_bytes, 0);
  // A tied head is the token embeddings, which stay on the CPU (an encoder has no head at all).
  const head = ngl > model.n_layer && !model.output_tied ? model.output_bytes : 0;
  const share = layers / Math.max(1, model.n_layer);
  const kvGpu = m.kv_cache * share;
  return {
    cpu: usage(m.weights - offloaded - head, m.kv_cache - kvGpu, 0, m.output, model.n_layer - layers),
    gpu: usage(offloaded + head, kvGpu, m.compute, 0, layers),
  };
}

function usage(weights: number, kv: number, compute: number, output: number, layers: number): DeviceUsage {
  return { weights, kv_cache: kv, compute, output, layers, total: weights + kv + compute + output };
}

function check(device: string, needed: number, budget: number, model: ModelInfo): void {
  if (needed <= budget) return;
  throw new CoreError(
    "model_plan_error",
    `${model.architecture} embedding model does not fit: ${device} needs ${gib(needed)} but has ${gib(budget)} available`,
    { device, needed_bytes: needed, available_bytes: budget },
  );
}

/** `-ngl` as the chat planner reports it (gpu-layers.ts), with the embedding model's reason. */
function decision(
  ngl: number,
  nLayer: number,
  usableGpus: number,
  explicit: boolean,
  unused: readonly string[],
) {
  // Its reason is replaced below: the chat model's words are not asked for.
  const d = decideGpuLayers(ngl, nLayer, usableGpus, explicit);
  const reason =
    usableGpus === 0
      ? `${noGpuReason(unused)}: the embedding model runs on the CPU`
      : explicit
        ? `model.gpu_layers: ${ngl}`
        : d.value.all
          ? "the whole embedding model fits on the first GPU"
          : "the embedding model does not fit on the first GPU: it runs on the CPU";
  return { ...d, decision: { ...d.decision, reason } };
}
