import { ggmlTypeName } from "./ggml-types.ts";
import type { TensorEntry } from "./gguf-read.ts";

/**
 * Where a model's bytes are: per repeating layer (`blk.N.*`), the token embeddings (never
 * offloaded), the output head and its norm, and the rest; the parameter count and the weight
 * type holding most of the bytes.
 */
export interface TensorTally {
  /** Bytes per repeating layer (holes where a layer has no tensors). */
  layer_bytes: number[];
  token_embd_bytes: number;
  /** `[n_embd, n_vocab]` of token_embd, for headers that lack them. */
  token_embd_shape: number[] | undefined;
  /** The output head and its norm; with tied embeddings the head is a copy of token_embd. */
  output_bytes: number;
  output_tied: boolean;
  other_bytes: number;
  weights_bytes: number;
  parameters: number;
  /** The weight type holding most of the bytes (Q4_K, F16…), matrices only. */
  file_type: string;
}

export function tallyTensors(tensors: readonly TensorEntry[]): TensorTally {
  const layers: number[] = [];
  let tokenEmbd = 0;
  let tokenEmbdShape: number[] | undefined;
  let output = 0;
  let hasOutput = false;
  let other = 0;
  let parameters = 0;
  const bytesByType = new Map<number, number>();
  for (const t of tensors) {
    parameters += t.shape.reduce((a, b) => a * b, 1);
    if (t.shape.length >= 2) bytesByType.set(t.type, (bytesByType.get(t.type) ?? 0) + t.bytes);
    const m = /^blk\.(\d+)\./.exec(t.name);
    if (m) {
      const il = Number(m[1]);
      layers[il] = (layers[il] ?? 0) + t.bytes;
    } else if (t.name === "token_embd.weight") {
      tokenEmbd += t.bytes;
      tokenEmbdShape = t.shape;
    } else if (t.name.startsWith("output.") || t.name.startsWith("output_norm.")) {
      output += t.bytes;
      if (t.name === "output.weight") hasOutput = true;
    } else other += t.bytes;
  }
  const tied = !hasOutput && tokenEmbd > 0;
  // The weights once: a tied head shares token_embd's bytes in the file.
  const weights = layers.reduce((a, b) => a + (b ?? 0), 0) + tokenEmbd + output + other;
  return {
    layer_bytes: layers,
    token_embd_bytes: tokenEmbd,
    token_embd_shape: tokenEmbdShape,
    output_bytes: tied ? output + tokenEmbd : output,
    output_tied: tied,
    other_bytes: other,
    weights_bytes: weights,
    parameters,
    file_type: dominantType(bytesByType),
  };
}

function dominantType(bytesByType: Map<number, number>): string {
  let fileType = "unknown";
  let most = -1;
  for (const [type, bytes] of bytesByType) {
    if (bytes > most) {
      most = bytes;
      fileType = ggmlTypeName(type);
    }
  }
  return fileType;
}
