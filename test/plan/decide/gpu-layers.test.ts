import { describe, expect, test } from "bun:test";
import { decideGpuLayers, explicitGpuLayers, mostGpuLayers } from "../../../src/plan/decide/gpu-layers.ts";
import { coreErrorOf } from "../../fixtures/core-error.ts";
import { fakeFitter, GIB, trial, usage } from "./fake-fit.ts";

describe("explicitGpuLayers", () => {
  test("auto is null; a count is capped at every layer plus the output head", () => {
    expect(explicitGpuLayers("auto", 33, 1, 1)).toBeNull();
    expect(explicitGpuLayers(10, 33, 1, 1)).toBe(10);
    expect(explicitGpuLayers(999, 33, 1, 1)).toBe(33);
  });

  test("0 needs no GPU; more with no usable GPU is model_plan_error naming the key", () => {
    expect(explicitGpuLayers(0, 33, 0, 0)).toBe(0);
    const e = coreErrorOf(() => explicitGpuLayers(10, 33, 0, 1));
    expect(e.code).toBe("model_plan_error");
    expect(e.data).toEqual({ key: "model.gpu_layers", gpus: 1 });
    expect(e.message).toContain("model.gpu_layers is 10");
  });

  // docs/plan.md "Which GPUs": a CPU build beside a GPU; the error says why, not "no GPU".
  test("with a GPU llama-server cannot use, the error says why", () => {
    const unused = "RTX 4090 is not used: llama-server lists no GPU device";
    const e = coreErrorOf(() => explicitGpuLayers(10, 33, 0, 0, [unused]));
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toBe(
      `model.gpu_layers is 10 but llama-server cannot use this machine's GPU: ${unused} (set it to auto or 0)`,
    );
  });
});

describe("mostGpuLayers", () => {
  // Each layer takes 1 GiB of GPU memory.
  const fit = () => fakeFitter((_ctx, ngl) => trial(true, true, [usage(ngl * GIB)]));

  test("the most layers whose share fits the budget", () => {
    const f = fit();
    expect(mostGpuLayers(f, [5.5 * GIB], 33, 4096, 1)).toBe(5);
    expect(f.calls[0]).toEqual([4096, 33, 1]);
  });

  test("no GPU, or not even one layer: 0", () => {
    expect(mostGpuLayers(fit(), [], 33, 4096, 1)).toBe(0);
    expect(mostGpuLayers(fit(), [0.5 * GIB], 33, 4096, 1)).toBe(0);
  });

  test("every GPU must hold its share", () => {
    const f = fakeFitter((_c, ngl) => trial(true, true, [usage((ngl / 2) * GIB), usage((ngl / 2) * GIB)]));
    expect(mostGpuLayers(f, [10 * GIB, 3 * GIB], 33, 4096, 1)).toBe(6);
  });
});

describe("decideGpuLayers", () => {
  test("the reason says where the layers went", () => {
    expect(decideGpuLayers(0, 32, 0, false).decision.reason).toContain("no GPU with free memory");
    // A GPU the configured llama-server cannot use (docs/plan.md "Which GPUs"): not "no free memory".
    expect(decideGpuLayers(0, 32, 0, false, ["RTX is not used"]).decision.reason).toBe(
      "no GPU this llama-server can use (the warnings say why): everything runs on the CPU",
    );
    const all = decideGpuLayers(33, 32, 1, false);
    expect(all.value).toEqual({ layers: 33, all: true });
    expect(all.decision).toMatchObject({
      name: "gpu_layers",
      value: 33,
      source: "auto",
      flags: ["-ngl", "33"],
    });
    expect(all.decision.reason).toBe("all 32 layers and the output head fit on the GPU");
    expect(decideGpuLayers(0, 32, 1, false).decision.reason).toContain("not even one layer");
    const part = decideGpuLayers(12, 32, 1, true);
    expect(part.value.all).toBe(false);
    expect(part.decision.source).toBe("config");
    expect(part.decision.reason).toBe("12 of 32 layers fit on the GPU; the rest run on the CPU");
  });
});
