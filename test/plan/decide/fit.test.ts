import { beforeAll, describe, expect, test } from "bun:test";
import type { Budgets } from "../../../src/plan/decide/budgets.ts";
import { fitter, noFit } from "../../../src/plan/decide/fit.ts";
import { readGgufHeader } from "../../../src/plan/gguf-read.ts";
import { type ModelInfo, modelInfo } from "../../../src/plan/model.ts";
import { llama7b, writeGguf } from "../../fixtures/gguf-writer.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const GIB = 2 ** 30;
const F16 = { cacheK: "f16", cacheV: "f16", flashAttn: true } as const;
let model: ModelInfo;
beforeAll(async () => {
  using dir = tmpdir();
  model = modelInfo(await readGgufHeader(writeGguf(dir.path, "l7.gguf", llama7b())));
});

const ram = (budget: number) => ({ total: budget, available: budget, margin: 0, budget });
const gpu = (i: number, budget: number, unified = false) => ({
  i,
  total: budget,
  available: budget,
  margin: 0,
  budget,
  unified,
  name: `g${i}`,
});

describe("fitter", () => {
  test("a 7B Q4 on a roomy CPU fits and leaves room", () => {
    const t = fitter(model, { ram: ram(32 * GIB), gpus: [] }, F16)(4096, 0, 1);
    expect(t.fits).toBe(true);
    expect(t.roomy).toBe(true);
    expect(t.short).toBeUndefined();
    expect(t.est.gpus).toEqual([]);
  });

  test("too little RAM: short on RAM, with needed and budget", () => {
    const t = fitter(model, { ram: ram(2 * GIB), gpus: [] }, F16)(4096, 0, 1);
    expect(t.fits).toBe(false);
    expect(t.short).toEqual({ device: "RAM", needed: t.est.cpu.total, budget: 2 * GIB });
  });

  test("RAM: the context may take half of what the weights leave", () => {
    // Weights 3.5 GiB, KV + compute + output 2.1 GiB: half of 7 - 3.5 is too little, of 8 - 3.5 enough.
    const tight = fitter(model, { ram: ram(7 * GIB), gpus: [] }, F16)(4096, 0, 1);
    const ctxCost = tight.est.cpu.kv_cache + tight.est.cpu.compute + tight.est.cpu.output;
    expect(tight.fits).toBe(true);
    expect(ctxCost).toBeGreaterThan(0.5 * (7 * GIB - tight.est.cpu.weights));
    expect(tight.roomy).toBe(false);
    expect(fitter(model, { ram: ram(8 * GIB), gpus: [] }, F16)(4096, 0, 1).roomy).toBe(true);
  });

  test("a discrete GPU's context may take 3/4 of what its weights leave, a unified one's half", () => {
    const at = (unified: boolean) =>
      fitter(model, { ram: ram(32 * GIB), gpus: [gpu(0, 7 * GIB, unified)] }, F16)(
        4096,
        model.n_layer + 1,
        1,
      );
    expect(at(false)).toMatchObject({ fits: true, roomy: true });
    expect(at(true)).toMatchObject({ fits: true, roomy: false });
  });

  test("a GPU that does not hold its share is named by its place in the snapshot", () => {
    const b: Budgets = { ram: ram(32 * GIB), gpus: [gpu(2, GIB)] };
    const t = fitter(model, b, F16)(4096, model.n_layer + 1, 1);
    expect(t.short?.device).toBe("gpu2 (g2)");
  });

  test("a unified GPU's use counts against RAM", () => {
    // The GPU holds its 5.6 GiB, but with the CPU's share RAM's 5.6 GiB is exceeded.
    const b: Budgets = { ram: ram(5.6 * GIB), gpus: [gpu(0, 6 * GIB, true)] };
    const t = fitter(model, b, F16)(4096, model.n_layer + 1, 1);
    expect(t.est.gpus[0]!.total).toBeLessThan(5.6 * GIB);
    expect(t.est.cpu.total + t.est.gpus[0]!.total).toBeGreaterThan(5.6 * GIB);
    expect(t.short?.device).toBe("RAM");
  });
});

describe("noFit", () => {
  test("names the device, needed vs available, the split, and the key that asked", () => {
    const t = fitter(model, { ram: ram(2 * GIB), gpus: [] }, F16)(8192, 0, 2);
    const e = noFit("llama", t, 8192, 2, "model.context");
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toMatch(
      /^llama model does not fit at model.context 8192: RAM needs [\d.]+ GiB but has 2.00 GiB available \(weights [\d.]+ GiB, KV cache [\d.]+ GiB for 2 slot\(s\), compute [\d.]+ MiB\)$/,
    );
    expect(e.data).toEqual({
      device: "RAM",
      needed_bytes: t.est.cpu.total,
      available_bytes: 2 * GIB,
      context_per_slot: 8192,
      slots: 2,
      key: "model.context",
    });
    const auto = noFit("llama", t, 2048, 1, null);
    expect(auto.message).toContain("even the smallest useful context (2048 tokens)");
    expect(auto.data?.key).toBeUndefined();
  });
});
