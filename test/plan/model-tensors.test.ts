import { describe, expect, test } from "bun:test";
import type { TensorEntry } from "../../src/plan/gguf-read.ts";
import { tallyTensors } from "../../src/plan/model-tensors.ts";

const t = (name: string, shape: number[], bytes: number, type = 12): TensorEntry => ({
  name,
  shape,
  type,
  bytes,
});

describe("tallyTensors", () => {
  const base = [
    t("token_embd.weight", [64, 100], 1000),
    t("blk.0.attn_q.weight", [64, 64], 300),
    t("blk.0.attn_norm.weight", [64], 4, 0),
    t("blk.1.attn_q.weight", [64, 64], 300),
    t("output_norm.weight", [64], 5, 0),
    t("rope_freqs.weight", [32], 7, 0),
  ];

  test("bytes per layer, embeddings, head, the rest; parameters; the dominant matrix type", () => {
    const tally = tallyTensors([...base, t("output.weight", [64, 100], 2000, 14)]);
    expect(tally).toEqual({
      layer_bytes: [304, 300],
      token_embd_bytes: 1000,
      token_embd_shape: [64, 100],
      output_bytes: 2005,
      output_tied: false,
      other_bytes: 7,
      weights_bytes: 304 + 300 + 1000 + 2005 + 7,
      parameters: 6400 + 4096 + 64 + 4096 + 64 + 32 + 6400,
      file_type: "Q6_K",
    });
  });

  test("no output.weight: the head is tied to token_embd, counted on the head but once in the weights", () => {
    const tally = tallyTensors(base);
    expect(tally.output_tied).toBe(true);
    expect(tally.output_bytes).toBe(1005);
    expect(tally.weights_bytes).toBe(304 + 300 + 1000 + 5 + 7);
    expect(tally.file_type).toBe("Q4_K");
  });

  test("an empty table", () => {
    expect(tallyTensors([])).toMatchObject({ layer_bytes: [], output_tied: false, file_type: "unknown" });
  });
});
