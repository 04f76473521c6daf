import type { Config } from "../../config/schema.ts";
import type { ModelInfo } from "../model.ts";
import { capContext, chooseContext, decideContext } from "./context.ts";
import type { Decided } from "./decided.ts";
import type { Fitter, Trial } from "./fit.ts";
import { decideGpuLayers, explicitGpuLayers, mostGpuLayers } from "./gpu-layers.ts";

/** What placing the model needs: the asked-for values, the fit trial, the GPUs' budgets. */
export interface PlacementInput {
  model: Pick<ModelInfo, "n_layer" | "context_train" | "architecture">;
  requested: Pick<Config["model"], "context" | "gpu_layers">;
  fit: Fitter;
  /** Budgets of the GPUs with memory to spend, in snapshot order. */
  gpuBudgets: number[];
  /** GPUs the probes found, usable or not (for the error when layers are asked of none). */
  detectedGpus: number;
  /** The snapshot's `gpus_unused`, for the error of layers asked for with no GPU to hold them. */
  gpusUnused?: readonly string[];
  slots: number;
}

export interface Placement {
  context: Decided<number>;
  gpuLayers: Decided<{ layers: number; all: boolean }>;
  /** The chosen launch's estimate, for the device table. */
  trial: Trial;
  warnings: string[];
}

/**
 * Context and GPU layers, decided together since they compete for the same memory: the
 * explicit values if set (capped, and model_plan_error when they do not fit), else the search
 * in context.ts with, at each step, the most layers the GPUs hold.
 */
export function decideContextAndLayers(p: PlacementInput): Placement {
  const maxNgl = p.model.n_layer + 1;
  const train = p.model.context_train;
  const gpus = p.gpuBudgets.length;
  const capped = capContext(p.requested.context, train);
  const explicitNgl = explicitGpuLayers(p.requested.gpu_layers, maxNgl, gpus, p.detectedGpus, p.gpusUnused);
  const chosen = chooseContext(
    {
      fit: p.fit,
      layersFor: (ctx) => explicitNgl ?? mostGpuLayers(p.fit, p.gpuBudgets, maxNgl, ctx, p.slots),
      slots: p.slots,
      train,
      maxNgl,
      gpus: gpus > 0,
      explicitNgl,
      architecture: p.model.architecture,
    },
    capped.ctx,
  );
  return {
    context: decideContext(chosen, train, p.slots, capped.ctx !== null),
    gpuLayers: decideGpuLayers(chosen.ngl, p.model.n_layer, gpus, explicitNgl !== null, p.gpusUnused),
    trial: chosen.trial,
    warnings: [...capped.warnings, ...chosen.warnings],
  };
}
