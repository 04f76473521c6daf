import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { estimate } from "../../src/plan/estimate.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { type GgufSpec, type GgufValue, writeGguf } from "../fixtures/gguf-writer.ts";
import { REAL_MODELS_DIR, realModelsSkip } from "../fixtures/shared.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The test fixtures' GGUF writer checked against files written by llama.cpp's own writer: a
// copy of a real header (same metadata and tensor table) must read and plan exactly like it.
const MODELS = ["tiny-llama.gguf", "tiny-llama-q8.gguf"].map((f) => join(REAL_MODELS_DIR, f));
const have = MODELS.every((m) => existsSync(m));

const title = "the GGUF fixture writer against llama.cpp's";
describe.skipIf(!have)(have ? title : realModelsSkip(title), () => {
  test.each(MODELS)("a copy of %s reads and plans the same", async (path) => {
    const real = await readGgufHeader(path);
    const metadata: GgufSpec["metadata"] = {};
    for (const [key, value] of Object.entries(real.metadata)) {
      if (typeof value === "number") {
        metadata[key] = (
          Number.isInteger(value) ? { type: "u32", value } : { type: "f32", value }
        ) as GgufValue;
      } else if (typeof value === "string" || typeof value === "boolean") {
        metadata[key] = value;
      } else if (key === "tokenizer.ggml.tokens" && "array_length" in value) {
        metadata[key] = {
          type: "arr_str",
          value: Array.from({ length: value.array_length }, (_, i) => `t${i}`),
        };
      }
    }
    using dir = tmpdir();
    const copy = await readGgufHeader(
      writeGguf(dir.path, "copy.gguf", {
        version: real.version as 2 | 3,
        metadata,
        tensors: real.tensors.map((t) => ({ name: t.name, shape: t.shape, type: t.type })),
      }),
    );
    expect(copy.tensors).toEqual(real.tensors);
    const a = modelInfo(real);
    const b = modelInfo(copy);
    for (const key of ["architecture", "n_layer", "n_embd", "parameters", "file_type"] as const) {
      expect({ key, value: b[key] }).toEqual({ key, value: a[key] });
    }
    const input = {
      ctxPerSlot: 2048,
      slots: 1,
      cacheK: "f16",
      cacheV: "f16",
      flashAttn: true,
      gpuLayers: 0,
      gpuShares: [],
    };
    expect(estimate(b, input as never)).toEqual(estimate(a, input as never));
    // The reader checks the file holds every tensor's data: the copy is complete, and its size
    // differs from the real one only by the header (the tokenizer arrays are not copied).
    expect(copy.size_bytes).toBeLessThanOrEqual(real.size_bytes);
  });
});
