import { CoreError } from "../protocol/errors.ts";
import { ggmlTypeName } from "./ggml-types.ts";
import type { GgufHeader } from "./gguf-read.ts";

/**
 * A vision projector (`--mmproj`) as its GGUF header tells it (docs/models.md "The projector"):
 * what it projects to, what it weighs, the shape of its encoder, and whether its images cost a
 * fixed number of tokens or one by size. Pure: the header is read by the edge above.
 */

/** The shape the plan needs of a projector. */
export interface ProjectorInfo {
  path: string;
  name: string | null;
  /** `clip.projector_type` (`mlp`, `pixtral`, `qwen2vl_merger`…). */
  projector_type: string;
  /** The width of what it hands the text model (its output tensor, else `clip.vision.projection_dim`). */
  width: number;
  /** The weight type holding most of its bytes (F16 preferred when several match). */
  file_type: string;
  weights_bytes: number;
  /** The vision encoder: its width, feed-forward width, heads, and image and patch size. */
  encoder: { embd: number; ff: number; heads: number; image_size: number; patch_size: number; merge: number };
  /** How its images cost tokens. */
  tokens: ImageTokens;
}

/**
 * `fixed`: every image resized to the projector's square, `count` tokens each (null where the
 * count is not simply patches); `by_size`: tokens grow with the image, bounded by llama.cpp's
 * default range for the projector type, which `--image-min-tokens`/`--image-max-tokens` move.
 */
export type ImageTokens =
  | { mode: "fixed"; count: number | null }
  | { mode: "by_size"; min: number; max: number; rows_add_tokens: boolean };

/**
 * Projector types whose image tokens follow the image's size, with llama.cpp's default range
 * (tools/mtmd/clip.cpp, b10587: `set_limit_image_tokens(min, max)` per type; the flags move it).
 * `rows`: a separator token after every row of patches (pixtral's `[IMG_BREAK]`, recording 109).
 */
const BY_SIZE: Record<string, { min: number; max: number; rows?: boolean }> = {
  pixtral: { min: 8, max: 1024, rows: true },
  kimivl: { min: 8, max: 1024 },
  kimik25: { min: 2, max: 4096 },
  lfm2: { min: 64, max: 256 },
  gemma4v: { min: 40, max: 280 },
  gemma4uv: { min: 40, max: 280 },
  qwen2vl_merger: { min: 8, max: 4096 },
  "qwen2.5vl_merger": { min: 8, max: 4096 },
  qwen3vl_merger: { min: 8, max: 4096 },
  minimax_m3: { min: 8, max: 576 },
  "muse-glimmer": { min: 1, max: 4096 },
  youtuvl: { min: 1, max: 62500 },
  glm4v: { min: 8, max: 4096 },
  hunyuanvl: { min: 256, max: 16384 },
};

/** Projector types that see one square of `image_size` as patches, plus the class token llama.cpp drops. */
const SQUARE_PATCHES = new Set(["mlp", "mlp_norm", "ldp", "ldpv2"]);

/** Why a file is not a usable projector, as `problem` in the error's data. */
export type ProjectorProblem = "absent" | "unreadable" | "not_projector" | "no_width" | "width_mismatch";

/** A header as a projector; a file that is not one (a text model: recording 105d) → `not_projector`. */
export function projectorInfo(
  header: GgufHeader,
): ProjectorInfo | { problem: ProjectorProblem; detail: string } {
  const md = header.metadata;
  const arch = md["general.architecture"];
  if (arch !== "clip" || md["clip.has_vision_encoder"] !== true)
    return {
      problem: "not_projector",
      detail:
        arch === "clip"
          ? "a projector without a vision encoder (audio only)"
          : `not a vision projector (general.architecture ${typeof arch === "string" ? arch : "missing"}, not clip)`,
    };
  const num = (key: string): number | undefined => {
    const v = md[key];
    return typeof v === "number" ? v : undefined;
  };
  const type = md["clip.projector_type"];
  const projectorType = typeof type === "string" ? type : "mlp";
  const width = outputWidth(projectorType, header.tensors) ?? num("clip.vision.projection_dim");
  if (width === undefined || width <= 0)
    return { problem: "no_width", detail: "its header has no clip.vision.projection_dim" };
  const encoder = {
    embd: num("clip.vision.embedding_length") ?? width,
    ff: num("clip.vision.feed_forward_length") ?? 4 * width,
    heads: num("clip.vision.attention.head_count") ?? 1,
    image_size: num("clip.vision.image_size") ?? 0,
    patch_size: num("clip.vision.patch_size") ?? 0,
    merge: num("clip.vision.spatial_merge_size") ?? num("clip.vision.projector.scale_factor") ?? 1,
  };
  const byType = new Map<number, number>();
  let weights = 0;
  for (const t of header.tensors) {
    weights += t.bytes;
    byType.set(t.type, (byType.get(t.type) ?? 0) + t.bytes);
  }
  const dominant = [...byType].sort((a, b) => b[1] - a[1])[0];
  const name = md["general.name"];
  return {
    path: header.path,
    name: typeof name === "string" ? name : null,
    projector_type: projectorType,
    width,
    file_type: dominant ? ggmlTypeName(dominant[0]) : "unknown",
    weights_bytes: weights,
    encoder,
    tokens: imageTokens(projectorType, encoder),
  };
}

/**
 * The tensor whose shape is the width libmtmd checks against the text model (llama.cpp
 * tools/mtmd/clip.cpp `clip_n_mmproj_embd`), for the types whose legacy converters wrote
 * something else in `clip.vision.projection_dim`: llava-surgery's wrote CLIP's own (768 for
 * LLaVA 1.5, whose text model is 4096 wide; MobileVLM's the same), MiniCPM-V's 0. Read as llama-server reads it,
 * those projectors are used rather than refused as another model's. Keyed by the type as the
 * file names it: MiniCPM-V's converter writes `resampler` (clip-impl.h's name for it).
 */
const OUTPUT_TENSOR: Record<string, { name: string; dim: 0 | 1 }> = {
  mlp: { name: "mm.2.weight", dim: 1 },
  resampler: { name: "resampler.proj.weight", dim: 0 },
  // MobileVLM's, from the same legacy converter as LLaVA's (convert_image_encoder_to_gguf.py).
  ldp: { name: "mm.model.mb_block.1.block.2.1.bias", dim: 0 },
  ldpv2: { name: "mm.model.peg.0.bias", dim: 0 },
};

function outputWidth(type: string, tensors: GgufHeader["tensors"]): number | undefined {
  const out = OUTPUT_TENSOR[type];
  const width = out && tensors.find((t) => t.name === out.name)?.shape[out.dim];
  return width !== undefined && width > 0 ? width : undefined;
}

function imageTokens(type: string, enc: ProjectorInfo["encoder"]): ImageTokens {
  const range = BY_SIZE[type];
  if (range) return { mode: "by_size", min: range.min, max: range.max, rows_add_tokens: range.rows === true };
  const side = enc.patch_size > 0 ? Math.floor(enc.image_size / enc.patch_size) : 0;
  return { mode: "fixed", count: SQUARE_PATCHES.has(type) && side > 0 ? side * side : null };
}

/** Whether `info` feeds a text model `modelWidth` wide; the reason when not (recording 105b). */
export function widthProblem(info: ProjectorInfo, modelWidth: number): string | null {
  return info.width === modelWidth
    ? null
    : `its projection width ${info.width} is not the model's embedding width ${modelWidth}`;
}

/**
 * The error a configured projector that cannot serve its model answers with: never reaching
 * llama-server. `model.key` is the config key that names the projector (`models.<i>.mmproj`).
 */
export function projectorError(
  projector: string,
  model: { path: string; width: number; key: string },
  problem: ProjectorProblem,
  detail: string,
  width: number | null = null,
): CoreError {
  return new CoreError("model_plan_error", `projector ${projector} for model ${model.path}: ${detail}`, {
    projector,
    key: model.key,
    problem,
    projector_width: width,
    model_width: model.width,
  });
}

/**
 * The projector a plan launches with: its file and header, how it was chosen; or none, and why
 * (`mmproj: none`, no projector found for `auto`, a kind of model that takes none).
 */
export type ProjectorChoice =
  | { kind: "found"; source: "config" | "auto"; info: ProjectorInfo }
  | { kind: "none"; reason: string; warning?: string };
