import { GGMLFileQuantizationType } from "@huggingface/gguf";
import type { GgufHeader } from "../plan/gguf-read.ts";
import type { ModelInfo } from "../plan/model.ts";

/**
 * The file's quantization as its publisher named it (`general.file_type`: Q4_K_M, Q8_0…), else
 * the weight type that holds most of the bytes (a header without that key).
 */
export function quantizationOf(header: GgufHeader, model: ModelInfo): string {
  const id = header.metadata["general.file_type"];
  const name = typeof id === "number" ? GGMLFileQuantizationType[id] : undefined;
  return typeof name === "string" ? name : model.file_type;
}
