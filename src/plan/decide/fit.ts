import { CoreError } from "../../protocol/errors.ts";
import type { DeviceUsage } from "../estimate.ts";
import { type Estimate, estimate } from "../estimate.ts";
import type { KvCacheType } from "../ggml-types.ts";
import type { ModelInfo } from "../model.ts";
import type { Budgets } from "./budgets.ts";

/**
 * One candidate launch (context, GPU layers, slots) estimated against the budgets: does it fit,
 * and does it leave room for the rest of the machine?
 */

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

/**
 * Context costs may spend at most this share of the memory the weights leave: half of RAM
 * (shared with the OS and every other program), three quarters of a discrete GPU's.
 */
const ROOM_SHARE_RAM = 0.5;
const ROOM_SHARE_GPU = 0.75;

export interface Trial {
  est: Estimate;
  fits: boolean;
  /** Context costs leave room: KV + compute + output within ROOM_SHARE of what weights leave. */
  roomy: boolean;
  /** The first device that does not fit, for error messages. */
  short?: { device: string; needed: number; budget: number };
}

/** Estimates a candidate launch: per-slot context, `-ngl`, slots. */
export type Fitter = (ctx: number, ngl: number, slots: number) => Trial;

/** What the estimate needs besides the shape of the launch. */
export interface FitSettings {
  cacheK: KvCacheType;
  cacheV: KvCacheType;
  flashAttn: boolean;
}

const ctxCost = (u: DeviceUsage) => u.kv_cache + u.compute + u.output;

export function fitter(model: ModelInfo, b: Budgets, s: FitSettings): Fitter {
  const gpuShares = b.gpus.map((g) => g.budget);
  return (ctx, ngl, slots) => {
    const est = estimate(model, {
      ctxPerSlot: ctx,
      slots,
      cacheK: s.cacheK,
      cacheV: s.cacheV,
      flashAttn: s.flashAttn,
      gpuLayers: ngl,
      gpuShares,
    });
    let short: Trial["short"];
    let roomy = true;
    let ramUse = est.cpu.total;
    est.gpus.forEach((u, k) => {
      const g = b.gpus[k]!;
      if (g.unified) ramUse += u.total;
      if (u.total > g.budget && !short)
        short = { device: `${g.remote?.id ?? `gpu${g.i}`} (${g.name})`, needed: u.total, budget: g.budget };
      if (ctxCost(u) > (g.unified ? ROOM_SHARE_RAM : ROOM_SHARE_GPU) * Math.max(0, g.budget - u.weights))
        roomy = false;
    });
    if (ramUse > b.ram.budget && !short) short = { device: "RAM", needed: ramUse, budget: b.ram.budget };
    if (ctxCost(est.cpu) > ROOM_SHARE_RAM * Math.max(0, b.ram.budget - (ramUse - ctxCost(est.cpu))))
      roomy = false;
    return { est, fits: !short, roomy, ...(short ? { short } : {}) };
  };
}

export function gib(n: number): string {
  if (n < GIB) return `${(n / MIB).toFixed(1)} MiB`;
  return `${(n / GIB).toFixed(n < 10 * GIB ? 2 : 1)} GiB`;
}

/**
 * The model_plan_error for a trial that does not fit: the first short device, needed against
 * available, and the split. `key` names the config key that asked for this context, if one did.
 */
export function noFit(
  architecture: string,
  t: Trial,
  ctx: number,
  slots: number,
  key: string | null,
): CoreError {
  const s = t.short!;
  const e = t.est;
  const sum = (f: (u: DeviceUsage) => number) => f(e.cpu) + e.gpus.reduce((a, u) => a + f(u), 0);
  const what = key ? `${key} ${ctx}` : `even the smallest useful context (${ctx} tokens)`;
  return new CoreError(
    "model_plan_error",
    `${architecture} model does not fit at ${what}: ${s.device} needs ${gib(s.needed)} but has ${gib(s.budget)} available ` +
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
