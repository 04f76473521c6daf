import type { DeviceUsage as PlannedUsage } from "../protocol/plan.ts";
import { cacheTypeBytes } from "./ggml-types.ts";
import type { ModelInfo } from "./model.ts";

/** What llama-server allocates on a device at load; the RAM prompt cache is the plan's to add (decide/cache-ram.ts). */
export type DeviceUsage = Omit<PlannedUsage, "cache_ram" | "projector">;

/**
 * Memory llama-server will allocate, per device, following its own accounting (checked against
 * its start-up logs: `model buffer size`, `llama_kv_cache: size`, `output buffer size`,
 * `compute buffer size`). Pure: numbers in, numbers out.
 */

export const UBATCH = 512;
/** KV cells per sequence come in multiples of 256 (and never fewer). */
export const KV_PAD = 256;

export interface EstimateInput {
  ctxPerSlot: number;
  slots: number;
  cacheK: string;
  cacheV: string;
  flashAttn: boolean;
  /** Layers offloaded, llama-server's -ngl: n_layer + 1 also moves the output head. */
  gpuLayers: number;
  /** Fraction of the offloaded layers each GPU takes (llama.cpp splits by free memory). */
  gpuShares: number[];
  ubatch?: number;
}

export interface Estimate {
  cpu: DeviceUsage;
  gpus: DeviceUsage[];
  kv_cells_per_slot: number;
  total: number;
}

export function padCells(n: number): number {
  return Math.max(KV_PAD, Math.ceil(n / KV_PAD) * KV_PAD);
}

/** Cells one sequence's cache holds in a layer (sliding-window layers keep window + batch). */
export function layerCells(model: ModelInfo, il: number, cellsPerSeq: number, ubatch = UBATCH): number {
  const layer = model.layers[il];
  if (layer?.swa && model.sliding_window) {
    return Math.min(cellsPerSeq, padCells(model.sliding_window + ubatch));
  }
  return cellsPerSeq;
}

/** KV cache bytes of one layer for all slots. */
export function layerKvBytes(
  model: ModelInfo,
  il: number,
  cellsPerSeq: number,
  slots: number,
  cacheK: string,
  cacheV: string,
): number {
  const layer = model.layers[il];
  if (!layer) return 0;
  const cells = layerCells(model, il, cellsPerSeq) * slots;
  return cells * (layer.k_per_token * cacheTypeBytes(cacheK) + layer.v_per_token * cacheTypeBytes(cacheV));
}

/** The whole KV cache (every layer, every slot) at a per-slot context. */
export function kvCacheBytes(
  model: ModelInfo,
  ctxPerSlot: number,
  slots: number,
  cacheK = "f16",
  cacheV = "f16",
): number {
  const cells = padCells(ctxPerSlot);
  let total = 0;
  for (let il = 0; il < model.n_layer; il++) total += layerKvBytes(model, il, cells, slots, cacheK, cacheV);
  return total;
}

/**
 * The graph's scratch memory for one micro-batch: the attention mask over the cells a sequence
 * sees, the activations of the widest layer and, without flash attention, the full KQ matrix.
 */
export function computeBytes(
  model: ModelInfo,
  cellsPerSeq: number,
  flashAttn: boolean,
  ubatch = UBATCH,
): number {
  let maxK = 0;
  let maxV = 0;
  for (const l of model.layers) {
    maxK = Math.max(maxK, l.k_per_token);
    maxV = Math.max(maxV, l.v_per_token);
  }
  const ff = model.experts ? model.experts.ff * model.experts.used : model.n_ff;
  const activations =
    ubatch * 4 * (2 * model.n_embd + 2 * ff + model.n_head * model.head_dim_k + maxK + maxV);
  const mask = cellsPerSeq * ubatch * (flashAttn ? 2 : 4);
  const kq = flashAttn ? 0 : cellsPerSeq * ubatch * model.n_head * 4;
  return activations + mask + kq;
}

/** Logits for one token per slot, kept in host memory. */
export function outputBytes(model: ModelInfo, slots: number): number {
  return model.n_vocab * 4 * slots;
}

function emptyUsage(): DeviceUsage {
  return { weights: 0, kv_cache: 0, compute: 0, output: 0, layers: 0, total: 0 };
}

/** Which device holds each repeating layer: -1 the CPU, else the GPU index. */
export function layerDevices(nLayer: number, gpuLayers: number, shares: number[]): number[] {
  const offloaded = shares.length === 0 ? 0 : Math.min(gpuLayers, nLayer);
  const first = nLayer - offloaded;
  const devices = Array.from({ length: nLayer }, () => -1);
  const total = shares.reduce((a, b) => a + b, 0) || 1;
  let cumulative = 0;
  let gpu = 0;
  for (let i = 0; i < offloaded; i++) {
    while (gpu < shares.length - 1 && i >= Math.round(((cumulative + shares[gpu]!) / total) * offloaded)) {
      cumulative += shares[gpu]!;
      gpu++;
    }
    devices[first + i] = gpu;
  }
  return devices;
}

export function estimate(model: ModelInfo, input: EstimateInput): Estimate {
  const ubatch = input.ubatch ?? UBATCH;
  const cells = padCells(input.ctxPerSlot);
  const cpu = emptyUsage();
  const gpus = input.gpuShares.map(emptyUsage);
  const devices = layerDevices(model.n_layer, input.gpuLayers, input.gpuShares);
  const outputOnGpu = gpus.length > 0 && input.gpuLayers > model.n_layer;
  const at = (d: number) => (d < 0 ? cpu : gpus[d]!);

  for (let il = 0; il < model.n_layer; il++) {
    const dev = at(devices[il]!);
    dev.weights += model.layers[il]?.weights_bytes ?? 0;
    dev.kv_cache += layerKvBytes(model, il, cells, input.slots, input.cacheK, input.cacheV);
    dev.layers += 1;
  }
  cpu.weights += model.token_embd_bytes + model.other_bytes;
  const head = model.output_tied ? model.output_bytes - model.token_embd_bytes : model.output_bytes;
  if (outputOnGpu) {
    // A tied head is duplicated onto the GPU; the CPU keeps the embeddings for lookups.
    gpus[gpus.length - 1]!.weights += model.output_bytes;
  } else {
    cpu.weights += head;
  }

  const full = computeBytes(model, cells, input.flashAttn, ubatch);
  let anyOnGpu = false;
  for (const g of gpus) {
    if (g.layers > 0) {
      g.compute = full;
      anyOnGpu = true;
    }
  }
  // With layers offloaded the CPU only stages inputs and, if it keeps the head, the logits.
  cpu.compute = anyOnGpu ? ubatch * 4 * model.n_embd * 3 : full;
  cpu.output = outputBytes(model, input.slots);

  for (const d of [cpu, ...gpus]) d.total = d.weights + d.kv_cache + d.compute + d.output;
  return {
    cpu,
    gpus,
    kv_cells_per_slot: cells,
    total: cpu.total + gpus.reduce((a, g) => a + g.total, 0),
  };
}
