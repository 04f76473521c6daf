import type { Decision, DevicePlan, ProjectorPlan } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";
import type { LaunchPlan } from "../launch-plan.ts";
import type { ProjectorChoice, ProjectorInfo } from "../projector.ts";
import type { Budgets } from "./budgets.ts";

/**
 * The vision projector in the plan (docs/plan.md "The projector"): its memory (weights from its
 * header, the encoder's compute buffer for the largest image it takes), where it is held, and the
 * cap on the tokens one image may take, a quarter of a slot's context. Pure.
 */

/** A quarter of a slot's context is the most one image may take (docs/plan.md "Images cost context"). */
export const IMAGE_SHARE_OF_SLOT = 4;

/**
 * Positions the encoder sees for the largest image: a fixed square's patches and its class
 * token; or, by size, the projector's most tokens times the patches merged into each. Without a
 * count in the header, a 24 × 24 square (LLaVA's).
 */
function encoderPositions(info: ProjectorInfo): number {
  const t = info.tokens;
  if (t.mode === "by_size") return t.max * info.encoder.merge * info.encoder.merge;
  return (t.count ?? 576) + 1;
}

/**
 * The encoder's compute buffer: f32 activations per position (the attention's and feed-forward's
 * widths; checked against llama-server's `reserve_compute_meta` line: 0.10 MiB for the fixed
 * 64-token projector, recording 108, 1.13 MiB for the pixtral one at 256 patches), and without
 * flash attention the scores of every head, positions squared.
 */
export function projectorComputeBytes(info: ProjectorInfo, flashAttn: boolean): number {
  const p = encoderPositions(info);
  const { embd, ff, heads } = info.encoder;
  const activations = 4 * p * (8 * embd + 4 * ff);
  return activations + (flashAttn ? 0 : 4 * heads * p * p);
}

/**
 * Where llama-server holds the projector: the first GPU of this machine (libmtmd offloads it
 * unless told not to), else RAM. An index into `budgets.gpus`, or null for RAM.
 */
export function projectorGpu(budgets: Budgets): number | null {
  const k = budgets.gpus.findIndex((g) => g.remote === undefined);
  return k < 0 ? null : k;
}

/** The budgets the text model's fit may spend: the projector's bytes taken first from where it goes. */
export function reserveProjector(budgets: Budgets, gpu: number | null, bytes: number): Budgets {
  if (bytes === 0) return budgets;
  if (gpu === null)
    return { ...budgets, ram: { ...budgets.ram, budget: Math.max(0, budgets.ram.budget - bytes) } };
  return {
    ...budgets,
    gpus: budgets.gpus.map((g, k) => (k === gpu ? { ...g, budget: Math.max(0, g.budget - bytes) } : g)),
  };
}

/** The image token limits the launch passes (`--image-max-tokens`, `--image-min-tokens`); null: none. */
export interface ImageTokenFlags {
  max: number | null;
  min: number | null;
}

/**
 * The cap on one image's tokens: where the projector's tokens grow with the image, at most a
 * quarter of a slot's context (half that where a separator follows every row of patches, so
 * the separators fit too: pixtral, recording 109). Only a cap below the projector's own limit
 * is passed: a higher one would only raise what llama-server reserves for its largest image.
 * A fixed-count projector has nothing to cap; one whose images take more than a quarter is a warning.
 */
export function decideImageTokens(
  info: ProjectorInfo,
  contextPerSlot: number,
): { value: ImageTokenFlags; perImage: number | null; decision: Decision; warning?: string } {
  const quarter = Math.floor(contextPerSlot / IMAGE_SHARE_OF_SLOT);
  const t = info.tokens;
  if (t.mode === "fixed") {
    const over = t.count !== null && t.count > quarter;
    const said = t.count === null ? "a number of tokens its type fixes" : `${t.count} tokens`;
    return {
      value: { max: null, min: null },
      perImage: t.count,
      decision: {
        name: "image_tokens",
        value: null,
        source: "auto",
        flags: [],
        reason: `projector ${info.projector_type} resizes every image to one square: ${said} each, nothing to cap (a quarter of a slot is ${quarter})`,
      },
      ...(over
        ? {
            warning: `each image takes ${t.count} tokens, more than a quarter of a slot's context (${quarter} of ${contextPerSlot}); a larger context leaves more room for text`,
          }
        : {}),
    };
  }
  const cap = Math.max(1, t.rows_add_tokens ? Math.floor(quarter / 2) : quarter);
  const perImage = (n: number) => (t.rows_add_tokens ? 2 * n : n);
  if (cap >= t.max)
    return {
      value: { max: null, min: null },
      perImage: perImage(t.max),
      decision: {
        name: "image_tokens",
        value: null,
        source: "auto",
        flags: [],
        reason: `projector ${info.projector_type} takes at most ${t.max} tokens per image by default, within a quarter of a slot (${quarter})`,
      },
    };
  const value = { max: cap, min: cap < t.min ? cap : null };
  const rows = t.rows_add_tokens ? " (half of it: a separator follows every row of patches)" : "";
  return {
    value,
    perImage: perImage(cap),
    decision: {
      name: "image_tokens",
      value: cap,
      source: "auto",
      flags: flags.imageTokens(value),
      reason: `projector ${info.projector_type} takes tokens by image size (up to ${t.max}): capped at ${cap} so one image takes at most a quarter of a slot (${quarter} of ${contextPerSlot})${rows}; larger images are scaled down`,
    },
  };
}

/** The `--mmproj` line of the report: the projector used and how it was chosen, or why none is. */
export function projectorDecision(choice: ProjectorChoice, modelWidth: number): Decision {
  if (choice.kind === "none")
    return {
      name: "mmproj",
      value: null,
      source: "auto",
      flags: [],
      reason: `no vision projector: ${choice.reason}`,
    };
  const { info } = choice;
  const how =
    choice.source === "config"
      ? "mmproj names it"
      : "mmproj: auto found it beside the model (or in its hub snapshot)";
  return {
    name: "mmproj",
    value: info.path,
    source: choice.source === "config" ? "config" : "auto",
    flags: flags.mmproj(info.path),
    reason: `${how}: projector ${info.projector_type} (${info.file_type}), projection width ${info.width} = the model's embedding width ${modelWidth}`,
  };
}

/** The report's `projector`: what was chosen, what it costs, where it lives, what one image may take. */
export function projectorReport(
  choice: Extract<ProjectorChoice, { kind: "found" }>,
  modelWidth: number,
  bytes: { weights: number; compute: number },
  device: string,
  tokens: { perImage: number | null; value: ImageTokenFlags },
): ProjectorPlan {
  const { info } = choice;
  return {
    path: info.path,
    source: choice.source,
    projector_type: info.projector_type,
    file_type: info.file_type,
    width: info.width,
    model_width: modelWidth,
    weights_bytes: bytes.weights,
    compute_bytes: bytes.compute,
    device,
    image_tokens: info.tokens.mode,
    image_tokens_max: tokens.perImage,
    image_max_tokens: tokens.value.max,
  };
}

/** The projector's bytes and the device that holds them (`gpu` an index into the budgets' GPUs). */
export interface ProjectorPlacement {
  bytes: { weights: number; compute: number };
  gpu: number | null;
  device: string;
}

/**
 * Before the text model is fitted: where the projector goes, what it takes there, and the
 * budgets left for the rest; `auto` passing a projector over is the plan's warning.
 */
export function placeProjector(
  choice: ProjectorChoice,
  budgets: Budgets,
  flashAttn: boolean,
): { placement: ProjectorPlacement; budgets: Budgets; warnings: string[] } {
  const gpu = projectorGpu(budgets);
  const device = gpu === null ? "cpu" : `gpu${budgets.gpus[gpu]!.i}`;
  if (choice.kind === "none")
    return {
      placement: { bytes: { weights: 0, compute: 0 }, gpu, device },
      budgets,
      warnings: choice.warning ? [choice.warning] : [],
    };
  const bytes = {
    weights: choice.info.weights_bytes,
    compute: projectorComputeBytes(choice.info, flashAttn),
  };
  return {
    placement: { bytes, gpu, device },
    budgets: reserveProjector(budgets, gpu, bytes.weights + bytes.compute),
    warnings: [],
  };
}

/** The device table with the projector counted where it is held (a unified GPU's bytes are RAM's too). */
export function withProjector(devices: DevicePlan[], p: ProjectorPlacement): DevicePlan[] {
  const n = p.bytes.weights + p.bytes.compute;
  if (n === 0) return devices;
  const fromRam = devices.find((d) => d.id === p.device)?.unified === true;
  return devices.map((d) => {
    if (d.id === p.device)
      return {
        ...d,
        usage: { ...d.usage, projector: n, total: d.usage.total + n },
        free_after_bytes: d.free_after_bytes - n,
      };
    return fromRam && d.kind === "cpu" ? { ...d, free_after_bytes: d.free_after_bytes - n } : d;
  });
}

/**
 * Once the context is decided: the launch's `--mmproj` and image token flags, the report's
 * lines (the projector, then its image tokens, in argv order) and its `projector`.
 */
export function imagesOf(
  choice: ProjectorChoice,
  placement: ProjectorPlacement,
  contextPerSlot: number,
  modelWidth: number,
): { launch: LaunchPlan["mmproj"]; decisions: Decision[]; report: ProjectorPlan | null; warnings: string[] } {
  const line = projectorDecision(choice, modelWidth);
  if (choice.kind === "none") return { launch: null, decisions: [line], report: null, warnings: [] };
  const images = decideImageTokens(choice.info, contextPerSlot);
  return {
    launch: { path: choice.info.path, image_tokens: images.value },
    decisions: [line, images.decision],
    report: projectorReport(choice, modelWidth, placement.bytes, placement.device, images),
    warnings: images.warning ? [images.warning] : [],
  };
}
