import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { computeBytes, estimate, kvCacheBytes, outputBytes } from "../../src/plan/estimate.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import {
  deepseek2,
  encodeGguf,
  gemma3,
  llama8b,
  tinyLlama,
  tinyLlamaQ8,
  writeGguf,
} from "../fixtures/gguf-writer.ts";
import { RECORDINGS } from "../fixtures/recordings-dir.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const MEMORY_LOGS = join(RECORDINGS, "memory");
const MIB = 2 ** 20;

async function infoOf(spec: Parameters<typeof writeGguf>[2]): Promise<ModelInfo> {
  using dir = tmpdir();
  return modelInfo(await readGgufHeader(writeGguf(dir.path, "m.gguf", spec)));
}

describe("KV cache", () => {
  test("8B llama, 32 layers, 8 KV heads × 128, f16, 8192 tokens = exactly 1 GiB", async () => {
    const m = await infoOf(llama8b());
    expect(kvCacheBytes(m, 8192, 1, "f16", "f16")).toBe(2 ** 30);
    // Two slots of 4096 cost the same; q8_0 costs 34/64 of it.
    expect(kvCacheBytes(m, 4096, 2, "f16", "f16")).toBe(2 ** 30);
    expect(kvCacheBytes(m, 8192, 1, "q8_0", "q8_0")).toBe((2 ** 30 * 34) / 64);
  });

  test("small per-slot contexts hit the 256-cell floor", async () => {
    const m = await infoOf(llama8b());
    expect(kvCacheBytes(m, 100, 4)).toBe(kvCacheBytes(m, 256, 4));
  });

  test("sliding-window layers keep only window + batch", async () => {
    const g = await infoOf(gemma3());
    const perCell = 8 * 256 * 2 * 2; // KV heads × head size × (K+V) × f16
    const full = 8 * 32768 * perCell; // 8 global layers
    const swa = 40 * 1536 * perCell; // 40 window layers: 1024 + 512 batch
    expect(kvCacheBytes(g, 32768, 1)).toBe(full + swa);
  });

  test("deepseek2 MLA stores the compressed latent, not per-head K/V", async () => {
    const d = await infoOf(deepseek2());
    expect(kvCacheBytes(d, 4096, 1)).toBe(27 * 4096 * (576 + 512) * 2);
  });
});

describe("device split", () => {
  test("offloading moves layers, their KV and the head to the GPU; embeddings stay on the CPU", async () => {
    const m = await infoOf(llama8b());
    const base = { ctxPerSlot: 4096, slots: 1, cacheK: "f16", cacheV: "f16", flashAttn: true };
    const cpuOnly = estimate(m, { ...base, gpuLayers: 0, gpuShares: [] });
    const all = estimate(m, { ...base, gpuLayers: 33, gpuShares: [1] });
    const half = estimate(m, { ...base, gpuLayers: 16, gpuShares: [1] });
    expect(all.gpus[0]!.layers).toBe(32);
    expect(all.cpu.weights).toBe(m.token_embd_bytes + m.other_bytes);
    expect(all.gpus[0]!.kv_cache).toBe(cpuOnly.cpu.kv_cache);
    expect(half.gpus[0]!.layers).toBe(16);
    expect(half.gpus[0]!.kv_cache).toBe(cpuOnly.cpu.kv_cache / 2);
    const two = estimate(m, { ...base, gpuLayers: 33, gpuShares: [1, 1] });
    expect(two.gpus.map((g) => g.layers)).toEqual([16, 16]);
  });
});

// llama-server's own accounting, from its start-up logs for the tiny models (memory/), each model's
// shape written by the project's own writer; the 8B-shaped log is checked below.
const TINY_SHAPES = { "tiny-llama": tinyLlama, "tiny-llama-q8": tinyLlamaQ8 };

describe("matches llama-server's start-up logs", () => {
  const logs = readdirSync(MEMORY_LOGS).filter((f) => /^tiny-llama.*\.log$/.test(f));
  const mib = (text: string, re: RegExp) => {
    const m = re.exec(text);
    if (!m) throw new Error(`no match for ${re}`);
    return Number(m[1]) * MIB;
  };
  test.each(logs)("%s", async (file) => {
    const name = /^(tiny-llama(?:-q8)?)-c(\d+)-np(\d+)\.log$/.exec(file);
    expect(name).not.toBeNull();
    const [, model, c, np] = name!;
    const text = readFileSync(join(MEMORY_LOGS, file), "utf8");
    const m = await infoOf(TINY_SHAPES[model as keyof typeof TINY_SHAPES]());
    const slots = Number(np);
    const e = estimate(m, {
      ctxPerSlot: Number(c) / slots,
      slots,
      cacheK: "f16",
      cacheV: "f16",
      flashAttn: true,
      gpuLayers: 0,
      gpuShares: [],
    });
    const actual = {
      weights: mib(text, /CPU model buffer size =\s+([\d.]+) MiB/),
      kv: mib(text, /llama_kv_cache: size =\s+([\d.]+) MiB/),
      output: mib(text, /CPU\s+output buffer size =\s+([\d.]+) MiB/),
      compute: mib(text, /CPU compute buffer size =\s+([\d.]+) MiB/),
      cells: Number(/\(\s*(\d+) cells/.exec(text)![1]),
    };
    const within10 = (est: number, act: number) =>
      expect(Math.abs(est - act)).toBeLessThanOrEqual(act * 0.1 + 0.01 * MIB);
    within10(e.cpu.weights, actual.weights);
    within10(e.cpu.kv_cache, actual.kv);
    within10(e.cpu.output, actual.output);
    expect(Math.abs(e.cpu.compute - actual.compute)).toBeLessThanOrEqual(16 * MIB);
    within10(e.cpu.compute, actual.compute);
    expect(e.kv_cells_per_slot).toBe(actual.cells);
  });
});

// memory/llama3-8b-shape-c8192-np1.log: a Llama-3-8B-shaped Q4_K GGUF at -c 8192 -np 1 on the CPU.
const EIGHT_B_LOG = join(MEMORY_LOGS, "llama3-8b-shape-c8192-np1.log");
describe("matches llama-server's 8B-shaped start-up log", () => {
  test("KV, output and compute of the same shape written by the fixture writer", async () => {
    const text = readFileSync(EIGHT_B_LOG, "utf8");
    const mibOf = (re: RegExp) => Number(re.exec(text)![1]) * MIB;
    const m = await infoOf(llama8b({ ctx: 131072 }));
    const e = estimate(m, {
      ctxPerSlot: 8192,
      slots: 1,
      cacheK: "f16",
      cacheV: "f16",
      flashAttn: true,
      gpuLayers: 0,
      gpuShares: [],
    });
    expect(e.cpu.kv_cache).toBe(mibOf(/llama_kv_cache: size =\s+([\d.]+) MiB/));
    expect(e.kv_cells_per_slot).toBe(Number(/\(\s*(\d+) cells/.exec(text)![1]));
    const output = mibOf(/CPU\s+output buffer size =\s+([\d.]+) MiB/);
    expect(Math.abs(e.cpu.output - output)).toBeLessThanOrEqual(output * 0.1 + 0.01 * MIB);
    // Known gap (docs/plan.md): at this size the compute estimate is about a quarter short of
    // llama-server's 124 MiB; it must stay within a third and never exceed it.
    const compute = mibOf(/CPU compute buffer size =\s+([\d.]+) MiB/);
    expect(e.cpu.compute).toBeLessThanOrEqual(compute);
    expect(e.cpu.compute).toBeGreaterThanOrEqual(compute * 0.67);
    // The mapped weights: the fixture's Q4_K tensors against llama-server's CPU_Mapped buffer.
    const mapped = mibOf(/CPU_Mapped model buffer size =\s+([\d.]+) MiB/);
    expect(Math.abs(e.cpu.weights - mapped)).toBeLessThanOrEqual(mapped * 0.1);
  });
});

describe("compute and output buffers", () => {
  test("grow with the cells a sequence sees, and more without flash attention", async () => {
    const m = await infoOf(llama8b());
    expect(computeBytes(m, 8192, true)).toBeGreaterThan(computeBytes(m, 4096, true));
    // Without flash attention the KQ matrix (cells × batch × heads × f32) is materialised.
    expect(computeBytes(m, 8192, false) - computeBytes(m, 8192, true)).toBeGreaterThanOrEqual(
      8192 * 512 * 32 * 4,
    );
    expect(outputBytes(m, 2)).toBe(128256 * 4 * 2);
  });

  test("the fixture header encodes to what it declares", () => {
    const { header, totalBytes } = encodeGguf(llama8b());
    expect(totalBytes).toBeGreaterThan(header.length);
  });
});
