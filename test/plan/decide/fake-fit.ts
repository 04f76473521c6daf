import type { Fitter, Trial } from "../../../src/plan/decide/fit.ts";
import type { DeviceUsage, Estimate } from "../../../src/plan/estimate.ts";

export const GIB = 2 ** 30;

export function usage(total: number, over: Partial<DeviceUsage> = {}): DeviceUsage {
  return { weights: total, kv_cache: 0, compute: 0, output: 0, layers: 0, total, ...over };
}

/** A trial whose verdict is given, for decisions that only read the verdict. */
export function trial(fits: boolean, roomy: boolean, gpus: DeviceUsage[] = []): Trial {
  const est: Estimate = { cpu: usage(GIB), gpus, kv_cells_per_slot: 256, total: GIB };
  return { est, fits, roomy, ...(fits ? {} : { short: { device: "RAM", needed: 2 * GIB, budget: GIB } }) };
}

/** A Fitter from a rule, recording every candidate it was asked about. */
export function fakeFitter(rule: (ctx: number, ngl: number, slots: number) => Trial): Fitter & {
  calls: [number, number, number][];
} {
  const calls: [number, number, number][] = [];
  const fit = (ctx: number, ngl: number, slots: number) => {
    calls.push([ctx, ngl, slots]);
    return rule(ctx, ngl, slots);
  };
  return Object.assign(fit, { calls });
}
