import type { Config } from "../../config/schema.ts";
import { CoreError } from "../../protocol/errors.ts";
import { flags } from "../argv.ts";
import type { Decided } from "./decided.ts";
import type { Fitter } from "./fit.ts";

/**
 * GPU layers (`-ngl`): `model.gpu_layers` (capped at all: n_layer + 1, the output head too), else
 * as many as the GPU budgets hold at the chosen context.
 */

/** The configured layer count, or null for auto. Layers with no usable GPU are model_plan_error. */
export function explicitGpuLayers(
  requested: Config["model"]["gpu_layers"],
  maxNgl: number,
  usableGpus: number,
  detectedGpus: number,
  /** Why GPUs a vendor tool found are not planned (plan/listed-devices.ts): the error says it. */
  unused: readonly string[] = [],
): number | null {
  if (typeof requested !== "number") return null;
  const ngl = Math.min(requested, maxNgl);
  if (ngl > 0 && usableGpus === 0) {
    throw new CoreError(
      "model_plan_error",
      unused.length > 0
        ? `model.gpu_layers is ${ngl} but llama-server cannot use this machine's GPU: ${unused.join("; ")} (set it to auto or 0)`
        : `model.gpu_layers is ${ngl} but no GPU with free memory was found (set it to auto or 0)`,
      { key: "model.gpu_layers", gpus: detectedGpus },
    );
  }
  return ngl;
}

/** The most layers (from all down to one) whose GPU share fits every GPU's budget; else 0. */
export function mostGpuLayers(
  fit: Fitter,
  gpuBudgets: number[],
  maxNgl: number,
  ctx: number,
  slots: number,
): number {
  if (gpuBudgets.length === 0) return 0;
  for (let n = maxNgl; n > 0; n--) {
    const t = fit(ctx, n, slots);
    if (t.est.gpus.every((u, k) => u.total <= gpuBudgets[k]!)) return n;
  }
  return 0;
}

/** Why nothing is offloaded: no free memory, or (`unused`) GPUs the configured llama-server cannot use. */
export function noGpuReason(unused: readonly string[] = []): string {
  return unused.length > 0
    ? "no GPU this llama-server can use (the warnings say why)"
    : "no GPU with free memory";
}

export function decideGpuLayers(
  ngl: number,
  nLayer: number,
  usableGpus: number,
  explicit: boolean,
  unused: readonly string[] = [],
): Decided<{ layers: number; all: boolean }> {
  const all = ngl >= nLayer + 1;
  return {
    value: { layers: ngl, all },
    decision: {
      name: "gpu_layers",
      value: ngl,
      source: explicit ? "config" : "auto",
      flags: flags.gpuLayers(ngl),
      reason:
        usableGpus === 0
          ? `${noGpuReason(unused)}: everything runs on the CPU`
          : all
            ? `all ${nLayer} layers and the output head fit on the GPU`
            : ngl === 0
              ? "not even one layer fits on the GPU beside its buffers: CPU only"
              : `${Math.min(ngl, nLayer)} of ${nLayer} layers fit on the GPU; the rest run on the CPU`,
    },
  };
}
