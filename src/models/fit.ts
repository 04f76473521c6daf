import { GGMLFileQuantizationType } from "@huggingface/gguf";
import type { GgufHeader } from "../plan/gguf-read.ts";
import type { HardwareSnapshot } from "../plan/hardware.ts";
import type { ModelInfo } from "../plan/model.ts";
import { makePlan, type PlanConfig } from "../plan/planner.ts";
import { isCoreError } from "../protocol/errors.ts";

/**
 * "Does this model fit this machine?": the planner's verdict with the config's settings, from
 * the header alone. Pure. `models`, the remote fit check and pull all ask it the same way.
 */
export type FitVerdict =
  | {
      fits: true;
      /** One line: context × slots, where the layers go. */
      summary: string;
      context_per_slot: number;
      slots: number;
      gpu_layers: number;
      gpu_layers_all: boolean;
      warnings: string[];
    }
  | { fits: false; summary: string };

export function fitVerdict(model: ModelInfo, hardware: HardwareSnapshot, config: PlanConfig): FitVerdict {
  try {
    const plan = makePlan(model, hardware, config);
    const gpu = plan.gpu_layers_all
      ? "all layers on the GPU"
      : plan.gpu_layers > 0
        ? `${plan.gpu_layers} of ${model.n_layer} layers on the GPU`
        : "CPU only";
    const tight = plan.warnings.some((w) => w.startsWith("memory is tight"));
    return {
      fits: true,
      summary: `fits: ${plan.context_per_slot} tokens × ${plan.slots} slot(s), ${gpu}${tight ? " (tight)" : ""}`,
      context_per_slot: plan.context_per_slot,
      slots: plan.slots,
      gpu_layers: plan.gpu_layers,
      gpu_layers_all: plan.gpu_layers_all,
      warnings: plan.warnings,
    };
  } catch (err) {
    // A plan error, or settings the config chose that this model cannot take: no fit either way.
    if (isCoreError(err) && (err.code === "model_plan_error" || err.code === "config_invalid"))
      return { fits: false, summary: `does not fit: ${err.message}` };
    throw err;
  }
}

/**
 * The file's quantization as its publisher named it (`general.file_type`: Q4_K_M, Q8_0…), else
 * the weight type that holds most of the bytes (a header without that key).
 */
export function quantizationOf(header: GgufHeader, model: ModelInfo): string {
  const id = header.metadata["general.file_type"];
  const name = typeof id === "number" ? GGMLFileQuantizationType[id] : undefined;
  return typeof name === "string" ? name : model.file_type;
}
