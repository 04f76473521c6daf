import type { Config } from "../config/schema.ts";
import { CoreError } from "../protocol/errors.ts";
import { type DeviceUsage, type Estimate, estimate, padCells } from "./estimate.ts";
import { applyOverrides, type HardwareSnapshot } from "./hardware.ts";
import type { ModelInfo } from "./model.ts";

/**
 * The planner: model + hardware + config → the llama-server launch, with a reason for every
 * choice. Pure (no IO, no clock), so every rule is unit-tested with hand-made snapshots.
 */

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/** Auto context steps; auto never goes past the last one (bigger contexts must be asked for). */
export const CONTEXT_LADDER = [2048, 4096, 8192, 16384, 32768];
/** With only part of the model on the GPU, context competes with layers: stay modest. */
const PARTIAL_OFFLOAD_MAX_CTX = 8192;
/**
 * Auto context may spend at most this share of the memory the weights leave: half of RAM
 * (shared with the OS and every other program), three quarters of a discrete GPU's.
 */
const ROOM_SHARE_RAM = 0.5;
const ROOM_SHARE_GPU = 0.75;

export interface Decision {
  name: string;
  value: string | number | boolean | null;
  source: "auto" | "config";
  /** The llama-server flags this decision produces. */
  flags: string[];
  reason: string;
}

export interface DevicePlan {
  id: string;
  kind: "cpu" | "gpu";
  name: string;
  unified: boolean;
  total_bytes: number;
  available_bytes: number;
  /** Kept free for the OS, the driver and other programs. */
  margin_bytes: number;
  budget_bytes: number;
  usage: DeviceUsage;
  free_after_bytes: number;
}

export interface Plan {
  model_path: string;
  slots: number;
  context_per_slot: number;
  context_total: number;
  gpu_layers: number;
  gpu_layers_all: boolean;
  threads: number;
  flash_attn: "on" | "off" | "auto";
  cache_type_k: string;
  cache_type_v: string;
  mmap: boolean;
  mlock: boolean;
  max_tokens: number | null;
  devices: DevicePlan[];
  decisions: Decision[];
  argv: string[];
  warnings: string[];
}

type PlanConfig = Pick<Config, "model" | "llama" | "hardware"> & {
  app: Pick<Config["app"], "max_parallel_chats">;
};

interface Budgets {
  ram: { total: number; available: number; margin: number; budget: number };
  gpus: {
    total: number;
    available: number;
    margin: number;
    budget: number;
    unified: boolean;
    name: string;
  }[];
}

function budgets(hw: HardwareSnapshot, config: PlanConfig): Budgets {
  const ramOverride = config.hardware.ram_bytes !== null;
  const total = hw.ram.total_bytes;
  const available = hw.ram.available_bytes ?? Math.floor(total / 2);
  const ramMargin = ramOverride ? 0 : Math.max(512 * MIB, Math.floor(total * 0.1));
  const vramOverride = config.hardware.vram_bytes !== null;
  const gpus = hw.gpus.map((g) => {
    const margin = vramOverride ? 0 : Math.max(512 * MIB, Math.floor(g.total_bytes * 0.05));
    let budget = Math.max(0, g.free_bytes - margin);
    // Unified memory: the GPU can never take more than what RAM has free.
    if (g.unified) budget = Math.min(budget, Math.max(0, available - ramMargin));
    return {
      total: g.total_bytes,
      available: g.free_bytes,
      margin,
      budget,
      unified: g.unified,
      name: g.name,
    };
  });
  return { ram: { total, available, margin: ramMargin, budget: Math.max(0, available - ramMargin) }, gpus };
}

interface Trial {
  est: Estimate;
  fits: boolean;
  /** Context costs leave room: KV + compute within ROOM_SHARE of what weights leave. */
  roomy: boolean;
  /** The first device that does not fit, for error messages. */
  short?: { device: string; needed: number; budget: number };
}

function gib(n: number): string {
  if (n < GIB) return `${(n / MIB).toFixed(1)} MiB`;
  return `${(n / GIB).toFixed(n < 10 * GIB ? 2 : 1)} GiB`;
}

export function makePlan(model: ModelInfo, rawHw: HardwareSnapshot, config: PlanConfig): Plan {
  const hw = applyOverrides(rawHw, config.hardware);
  const warnings = [...model.warnings];
  const decisions: Decision[] = [];
  const b = budgets(hw, config);
  const usableGpus = b.gpus.map((g, i) => ({ ...g, i })).filter((g) => g.budget > 0);
  if (config.hardware.vram_bytes !== null && rawHw.gpus.length === 0 && config.hardware.vram_bytes > 0) {
    warnings.push("hardware.vram_bytes is set but no GPU was detected: it is ignored");
  }
  const shares = usableGpus.map((g) => g.budget);
  const maxNgl = model.n_layer + 1;
  const { llama } = config;

  // Flash attention and cache types go together: a quantized V cache needs flash attention.
  const quantV = !["f32", "f16", "bf16"].includes(llama.cache_type_v);
  if (quantV && llama.flash_attn === "off") {
    throw new CoreError(
      "config_invalid",
      `llama.cache_type_v ${llama.cache_type_v} needs flash attention, but llama.flash_attn is off`,
      { key: "llama.flash_attn" },
    );
  }
  const flashAttn: Plan["flash_attn"] = quantV ? "on" : llama.flash_attn;

  const trial = (ctx: number, ngl: number, slots: number): Trial => {
    const est = estimate(model, {
      ctxPerSlot: ctx,
      slots,
      cacheK: llama.cache_type_k,
      cacheV: llama.cache_type_v,
      flashAttn: flashAttn !== "off",
      gpuLayers: ngl,
      gpuShares: shares,
    });
    let short: Trial["short"];
    let roomy = true;
    const ctxCost = (u: DeviceUsage) => u.kv_cache + u.compute + u.output;
    let ramUse = est.cpu.total;
    est.gpus.forEach((u, k) => {
      const g = usableGpus[k]!;
      if (g.unified) ramUse += u.total;
      if (u.total > g.budget && !short)
        short = { device: `gpu${g.i} (${g.name})`, needed: u.total, budget: g.budget };
      if (ctxCost(u) > (g.unified ? ROOM_SHARE_RAM : ROOM_SHARE_GPU) * Math.max(0, g.budget - u.weights))
        roomy = false;
    });
    if (ramUse > b.ram.budget && !short) short = { device: "RAM", needed: ramUse, budget: b.ram.budget };
    if (ctxCost(est.cpu) > ROOM_SHARE_RAM * Math.max(0, b.ram.budget - (ramUse - ctxCost(est.cpu))))
      roomy = false;
    return { est, fits: !short, roomy, ...(short ? { short } : {}) };
  };

  // ---- slots ---------------------------------------------------------------------------
  let slots: number;
  if (typeof llama.parallel === "number") {
    slots = llama.parallel;
    decisions.push({
      name: "slots",
      value: slots,
      source: "config",
      flags: ["-np", String(slots)],
      reason: `llama.parallel: ${slots} chats at once, each with its own context`,
    });
  } else if (typeof config.app.max_parallel_chats === "number") {
    slots = config.app.max_parallel_chats;
    decisions.push({
      name: "slots",
      value: slots,
      source: "config",
      flags: ["-np", String(slots)],
      reason: `app.max_parallel_chats: one slot per chat that may run at once`,
    });
  } else {
    slots = 1;
    decisions.push({
      name: "slots",
      value: 1,
      source: "auto",
      flags: ["-np", "1"],
      reason:
        "one chat at a time gets the whole context (llama-server's default of 4 would split it); set llama.parallel for more",
    });
  }

  // ---- context and GPU layers ----------------------------------------------------------------
  const train = model.context_train;
  let explicitCtx: number | null = null;
  if (typeof config.model.context === "number") {
    explicitCtx = config.model.context;
    if (explicitCtx > train) {
      warnings.push(
        `model.context ${explicitCtx} is above the model's trained context ${train}: capped to ${train}`,
      );
      explicitCtx = train;
    }
  }
  const explicitNgl =
    typeof config.model.gpu_layers === "number" ? Math.min(config.model.gpu_layers, maxNgl) : null;
  if (explicitNgl !== null && explicitNgl > 0 && usableGpus.length === 0) {
    throw new CoreError(
      "model_plan_error",
      `model.gpu_layers is ${explicitNgl} but no GPU with free memory was found (set it to auto or 0)`,
      { key: "model.gpu_layers", gpus: rawHw.gpus.length },
    );
  }

  /** The most layers the GPUs hold at this context, or the explicit count. */
  const nglFor = (ctx: number): number => {
    if (explicitNgl !== null) return explicitNgl;
    if (usableGpus.length === 0) return 0;
    for (let n = maxNgl; n > 0; n--) {
      const t = trial(ctx, n, slots);
      if (t.est.gpus.every((u, k) => u.total <= usableGpus[k]!.budget)) return n;
    }
    return 0;
  };

  const minCtx = Math.min(CONTEXT_LADDER[0]!, train);
  const ladder = CONTEXT_LADDER.filter((c) => c <= train);
  if (ladder.length === 0) ladder.push(train);
  const descending = [...ladder].reverse();

  let chosen: { ctx: number; ngl: number; t: Trial; why: string } | null = null;
  if (explicitCtx !== null) {
    const ngl = nglFor(explicitCtx);
    const t = trial(explicitCtx, ngl, slots);
    if (!t.fits) throw noFit(model, t, explicitCtx, slots, "model.context");
    chosen = { ctx: explicitCtx, ngl, t, why: "model.context" };
  } else {
    // 1. The whole model on the GPU with a useful context beats a bigger context half on the CPU.
    if (usableGpus.length > 0 && (explicitNgl === null || explicitNgl === maxNgl)) {
      for (const ctx of descending) {
        if (ctx < Math.min(4096, train)) break;
        const t = trial(ctx, maxNgl, slots);
        if (t.fits && t.roomy) {
          chosen = { ctx, ngl: maxNgl, t, why: "the largest step that fits on the GPU with room to spare" };
          break;
        }
      }
    }
    // 2. Otherwise the largest step that fits with room, partial offload kept modest.
    if (!chosen) {
      for (const ctx of descending) {
        const ngl = nglFor(ctx);
        if (ngl > 0 && ngl < maxNgl && ctx > PARTIAL_OFFLOAD_MAX_CTX) continue;
        const t = trial(ctx, ngl, slots);
        if (t.fits && t.roomy) {
          chosen = {
            ctx,
            ngl,
            t,
            why: "the largest step that fits while leaving room for the rest of the machine",
          };
          break;
        }
      }
    }
    // 3. Tight: the smallest useful context, if it fits at all.
    if (!chosen) {
      const ngl = nglFor(minCtx);
      const t = trial(minCtx, ngl, slots);
      if (!t.fits) throw noFit(model, t, minCtx, slots, null);
      chosen = { ctx: minCtx, ngl, t, why: "the smallest useful context: memory is tight" };
      warnings.push("memory is tight: the plan uses the smallest useful context and leaves little room");
    }
  }

  const ctx = padCells(chosen.ctx);
  const { ngl, t } = chosen;
  decisions.push({
    name: "context",
    value: ctx,
    source: explicitCtx !== null ? "config" : "auto",
    flags: ["-c", String(ctx * slots)],
    reason:
      `${ctx} tokens per slot (trained: ${train}); ${chosen.why}` +
      (slots > 1 ? `; -c is the total, ${ctx} × ${slots} slots` : ""),
  });
  const all = ngl >= maxNgl;
  decisions.push({
    name: "gpu_layers",
    value: ngl,
    source: explicitNgl !== null ? "config" : "auto",
    flags: ["-ngl", String(ngl)],
    reason:
      usableGpus.length === 0
        ? "no GPU with free memory: everything runs on the CPU"
        : all
          ? `all ${model.n_layer} layers and the output head fit on the GPU`
          : ngl === 0
            ? "not even one layer fits on the GPU beside its buffers: CPU only"
            : `${Math.min(ngl, model.n_layer)} of ${model.n_layer} layers fit on the GPU; the rest run on the CPU`,
  });

  // ---- threads -----------------------------------------------------------------------------
  const threads =
    typeof llama.threads === "number" ? llama.threads : Math.max(1, hw.cpu.physical ?? hw.cpu.logical);
  decisions.push({
    name: "threads",
    value: threads,
    source: typeof llama.threads === "number" ? "config" : "auto",
    flags: ["-t", String(threads)],
    reason:
      typeof llama.threads === "number"
        ? "llama.threads"
        : hw.cpu.physical
          ? `one per physical core (${hw.cpu.physical}); hyper-threads slow matrix work down`
          : `one per logical core (${hw.cpu.logical}); physical cores unknown`,
  });

  decisions.push({
    name: "flash_attn",
    value: flashAttn,
    source: llama.flash_attn === "auto" && !quantV ? "auto" : "config",
    flags: ["-fa", flashAttn],
    reason: quantV
      ? `a ${llama.cache_type_v} V cache requires flash attention`
      : flashAttn === "auto"
        ? "llama-server enables it where the backend supports it (the estimate assumes it does)"
        : `llama.flash_attn: ${flashAttn}`,
  });
  decisions.push({
    name: "cache_types",
    value: `${llama.cache_type_k}/${llama.cache_type_v}`,
    source: llama.cache_type_k === "f16" && llama.cache_type_v === "f16" ? "auto" : "config",
    flags: ["--cache-type-k", llama.cache_type_k, "--cache-type-v", llama.cache_type_v],
    reason:
      llama.cache_type_k === "f16" && llama.cache_type_v === "f16"
        ? "f16 keeps full quality; set llama.cache_type_k/v to q8_0 to halve the KV cache"
        : "llama.cache_type_k/v",
  });
  const memFlags = [...(llama.mmap ? [] : ["--no-mmap"]), ...(llama.mlock ? ["--mlock"] : [])];
  decisions.push({
    name: "mmap",
    value: llama.mmap,
    source: "config",
    flags: memFlags,
    reason: llama.mmap
      ? "weights are memory-mapped: fast start, pages shared with the file cache" +
        (llama.mlock ? "; locked in RAM (llama.mlock)" : "")
      : "llama.mmap is false: weights are read into private memory" + (llama.mlock ? " and locked" : ""),
  });
  decisions.push({
    name: "jinja",
    value: true,
    source: "auto",
    flags: ["--jinja"],
    reason: "the model's chat template renders tools, which tool calling needs",
  });

  const argv = ["-m", model.path, ...decisions.flatMap((d) => d.flags), ...llama.extra_args];
  if (llama.extra_args.length > 0) {
    decisions.push({
      name: "extra_args",
      value: llama.extra_args.join(" "),
      source: "config",
      flags: [...llama.extra_args],
      reason: "llama.extra_args, passed through last (they win over planned flags)",
    });
  }

  const devices: DevicePlan[] = [
    {
      id: "cpu",
      kind: "cpu",
      name: hw.cpu.model ?? "CPU",
      unified: false,
      total_bytes: b.ram.total,
      available_bytes: b.ram.available,
      margin_bytes: b.ram.margin,
      budget_bytes: b.ram.budget,
      usage: t.est.cpu,
      free_after_bytes: b.ram.budget - t.est.cpu.total - sumUnified(t.est, usableGpus),
    },
    ...usableGpus.map((g, k) => ({
      id: `gpu${g.i}`,
      kind: "gpu" as const,
      name: g.name,
      unified: g.unified,
      total_bytes: g.total,
      available_bytes: g.available,
      margin_bytes: g.margin,
      budget_bytes: g.budget,
      usage: t.est.gpus[k]!,
      free_after_bytes: g.budget - t.est.gpus[k]!.total,
    })),
  ];

  return {
    model_path: model.path,
    slots,
    context_per_slot: ctx,
    context_total: ctx * slots,
    gpu_layers: ngl,
    gpu_layers_all: all,
    threads,
    flash_attn: flashAttn,
    cache_type_k: llama.cache_type_k,
    cache_type_v: llama.cache_type_v,
    mmap: llama.mmap,
    mlock: llama.mlock,
    max_tokens: config.model.max_tokens,
    devices,
    decisions,
    argv,
    warnings,
  };
}

function sumUnified(est: Estimate, gpus: { unified: boolean }[]): number {
  return est.gpus.reduce((a, u, k) => a + (gpus[k]?.unified ? u.total : 0), 0);
}

function noFit(model: ModelInfo, t: Trial, ctx: number, slots: number, key: string | null): CoreError {
  const s = t.short!;
  const e = t.est;
  const sum = (f: (u: DeviceUsage) => number) => f(e.cpu) + e.gpus.reduce((a, u) => a + f(u), 0);
  const what = key ? `${key} ${ctx}` : `even the smallest useful context (${ctx} tokens)`;
  return new CoreError(
    "model_plan_error",
    `${model.architecture} model does not fit at ${what}: ${s.device} needs ${gib(s.needed)} but has ${gib(s.budget)} available ` +
      `(weights ${gib(sum((u) => u.weights))}, KV cache ${gib(sum((u) => u.kv_cache))} for ${slots} slot(s), ` +
      `compute ${gib(sum((u) => u.compute))})`,
    {
      device: s.device,
      needed_bytes: s.needed,
      available_bytes: s.budget,
      context_per_slot: ctx,
      slots,
      ...(key ? { key } : {}),
    },
  );
}
