import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { decideEmbedding, type EmbeddingInput } from "../../../src/plan/decide/embedding.ts";
import { readGgufHeader } from "../../../src/plan/gguf-read.ts";
import { modelInfo } from "../../../src/plan/model.ts";
import { RECORDINGS } from "../../contract/recordings.ts";
import { type BertShape, bertModel } from "../../fixtures/gguf-bert.ts";
import { type GgufSpec, llama7b, writeGguf } from "../../fixtures/gguf-writer.ts";
import { REAL_MODELS_DIR, realModelsSkip } from "../../fixtures/shared.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// The embedding model's flags and memory (docs/plan.md "Embedding models"), from headers the
// BERT fixture writes, and from llama.cpp's own tiny-embed.gguf (an opt-in real-file check) held to recording 119's numbers.

const MIB = 2 ** 20;

async function inputOf(spec: GgufSpec, o: Partial<EmbeddingInput> = {}): Promise<EmbeddingInput> {
  using dir = tmpdir("local-ai-embed-plan-");
  const header = await readGgufHeader(writeGguf(dir.path, "m.gguf", spec));
  return { model: modelInfo(header), ...o };
}
const bert = (shape: Partial<BertShape> = {}, o: Partial<EmbeddingInput> = {}) =>
  inputOf(bertModel(shape), o);

describe("decideEmbedding", () => {
  test("a BERT of pooling mean: --embeddings, its pooling, one batch per input, slots, no RAM cache, no KV types", async () => {
    const d = decideEmbedding(await bert());
    expect(d.flags).toEqual([
      "--embeddings",
      "--pooling",
      "mean",
      "-np",
      "4",
      "-c",
      "2048",
      "-b",
      "512",
      "-ub",
      "512",
      "--cache-ram",
      "0",
    ]);
    expect(d).toMatchObject({ pooling: "mean", batch: 512, slots: 4, causal: false });
    expect(d.flags.some((f) => f.startsWith("--cache-type"))).toBe(false);
    expect(d.reasons[0]).toContain("as the GGUF declares");
  });

  test("the pooling the GGUF declares; none, absent or rank become mean, said so (recordings 117, 118)", async () => {
    expect(decideEmbedding(await bert({ pooling: 2 })).pooling).toBe("cls");
    expect(decideEmbedding(await bert({ pooling: 3 })).pooling).toBe("last");
    for (const pooling of [0, null, 4]) {
      const d = decideEmbedding(await bert({ pooling }));
      expect(d.pooling).toBe("mean");
      expect(d.flags.slice(0, 3)).toEqual(["--embeddings", "--pooling", "mean"]);
    }
    expect(decideEmbedding(await bert({ pooling: 4 })).reasons[0]).toContain("reranker");
  });

  test("the batch is the model's positions unless asked for less; slots set -c per slot", async () => {
    expect(decideEmbedding(await bert({ ctx: 8192 })).batch).toBe(8192);
    const shorter = decideEmbedding(await bert({}, { maxInputTokens: 256, slots: 1 }));
    expect(shorter.flags).toEqual(
      expect.arrayContaining(["-np", "1", "-c", "256", "-b", "256", "-ub", "256"]),
    );
    expect(decideEmbedding(await bert({}, { maxInputTokens: 100_000 })).batch).toBe(512);
  });

  test("an encoder's memory: every tensor's bytes and a compute buffer growing with the batch, no KV cache", async () => {
    const input = await bert({ ctx: 2048 });
    const tensorBytes = input.model.weights_bytes;
    const small = decideEmbedding({ ...input, maxInputTokens: 512 }).memory;
    const large = decideEmbedding({ ...input, maxInputTokens: 2048 }).memory;
    expect(small.weights).toBe(tensorBytes);
    expect(small.kv_cache).toBe(0);
    expect(large.compute).toBeGreaterThan(small.compute);
    for (const m of [small, large]) expect(m.total).toBe(m.weights + m.kv_cache + m.compute + m.output);
  });

  test("a decoder used as an embedder (recording 96) keeps a KV cache for its batch", async () => {
    const d = decideEmbedding(await inputOf(llama7b()));
    expect(d.causal).toBe(true);
    expect(d.memory.kv_cache).toBeGreaterThan(0);
    expect(d.pooling).toBe("mean");
    expect(d.reasons[0]).toContain("declares none");
  });
});

const TINY_EMBED = join(REAL_MODELS_DIR, "tiny-embed.gguf");
const realFiles = existsSync(TINY_EMBED);
if (!realFiles) console.warn(realModelsSkip("the embedding plan against tiny-embed.gguf"));

describe.skipIf(!realFiles)("decideEmbedding on tiny-embed.gguf (recording 119)", () => {
  /** A `… buffer size = N MiB` line of 119's start-up log. */
  const logged = (what: RegExp) => {
    const log = readFileSync(join(RECORDINGS, "transcripts", "119-embed-startup-log.txt"), "utf8");
    const m = new RegExp(`${what.source}\\s*=\\s*([\\d.]+) MiB`).exec(log);
    if (!m) throw new Error(`119 has no ${what.source} line`);
    return Number(m[1]) * MIB;
  };

  test("the header as llama.cpp printed it; weights and compute as llama-server allocated them", async () => {
    const header = await readGgufHeader(TINY_EMBED);
    const md = header.metadata;
    expect([md["general.architecture"], md["bert.pooling_type"], md["bert.context_length"]]).toEqual([
      "bert",
      1,
      512,
    ]);
    const d = decideEmbedding({ model: modelInfo(header) });
    expect(d).toMatchObject({ pooling: "mean", batch: 512, causal: false });
    expect(d.memory.kv_cache).toBe(0);
    // The log rounds to 0.01 MiB.
    expect(Math.abs(d.memory.weights - logged(/CPU_Mapped model buffer size/))).toBeLessThan(0.006 * MIB);
    const compute = logged(/CPU compute buffer size/);
    expect(Math.abs(d.memory.compute - compute) / compute).toBeLessThan(0.05);
  });

  test("the BERT fixture writes tiny-embed.gguf's tensors and the keys the plan reads", async () => {
    const real = await readGgufHeader(TINY_EMBED);
    const ours = await inputOf(bertModel());
    using dir = tmpdir("local-ai-embed-plan-");
    const fixture = await readGgufHeader(writeGguf(dir.path, "m.gguf", bertModel()));
    expect(fixture.tensors).toEqual(real.tensors);
    for (const key of [
      "bert.pooling_type",
      "bert.context_length",
      "bert.embedding_length",
      "bert.attention.causal",
    ])
      expect(fixture.metadata[key]).toEqual(real.metadata[key]);
    expect(decideEmbedding(ours)).toEqual(decideEmbedding({ model: modelInfo(real) }));
  });
});
