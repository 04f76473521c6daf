import type { GgufHeader } from "./gguf-read.ts";

/**
 * Reading an architecture's hyperparameters from GGUF metadata: keys are prefixed with the
 * architecture (`llama.block_count`), and some are per-layer arrays.
 */

export type Metadata = GgufHeader["metadata"];

/** A model's `<arch>.*` keys, read as numbers. */
export interface Hyperparams {
  arch: string;
  /** One number for the model; a per-layer array counts as its largest entry. */
  num(key: string): number | undefined;
  /** Layer `il`'s value of a per-layer array, or the one number every layer shares. */
  perLayer(key: string, il: number): number | undefined;
  /** The raw value, for keys whose shape varies (patterns). */
  raw(key: string): Metadata[string] | undefined;
}

export function architectureOf(md: Metadata): string {
  const arch = md["general.architecture"];
  return typeof arch === "string" ? arch : "unknown";
}

export function hyperparams(md: Metadata, arch: string): Hyperparams {
  const raw = (key: string) => md[`${arch}.${key}`];
  return {
    arch,
    raw,
    num(key) {
      const v = raw(key);
      if (typeof v === "number") return v;
      if (Array.isArray(v) && v.length > 0)
        return v.reduce((a, b) => Math.max(a, b), Number.NEGATIVE_INFINITY);
      return undefined;
    },
    perLayer(key, il) {
      const v = raw(key);
      if (Array.isArray(v)) return v[il];
      return typeof v === "number" ? v : undefined;
    },
  };
}
