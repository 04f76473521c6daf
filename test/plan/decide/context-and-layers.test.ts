import { describe, expect, test } from "bun:test";
import { decideContextAndLayers, type PlacementInput } from "../../../src/plan/decide/context-and-layers.ts";
import { coreErrorOf } from "../../fixtures/core-error.ts";
import { fakeFitter, GIB, trial, usage } from "./fake-fit.ts";

const MODEL = { n_layer: 32, context_train: 8192, architecture: "llama" };
// Each offloaded layer takes 1 GiB of GPU memory; a launch fits, with room, when the GPU holds it.
const perLayer = (gpuBudget = 0) =>
  fakeFitter((_ctx, ngl) => trial(ngl * GIB <= gpuBudget, true, [usage(ngl * GIB)]));

function input(over: Partial<PlacementInput> = {}): PlacementInput {
  return {
    model: MODEL,
    requested: { context: "auto", gpu_layers: "auto" },
    fit: perLayer(),
    gpuBudgets: [],
    detectedGpus: 0,
    slots: 1,
    ...over,
  };
}

describe("decideContextAndLayers", () => {
  test("CPU only: the largest step, no layers", () => {
    const p = decideContextAndLayers(input());
    expect(p.context.value).toBe(8192);
    expect(p.gpuLayers.value).toEqual({ layers: 0, all: false });
    expect(p.gpuLayers.decision.reason).toContain("no GPU with free memory");
    expect(p.warnings).toEqual([]);
  });

  test("a GPU that holds everything takes all layers and the head", () => {
    const p = decideContextAndLayers(
      input({ fit: perLayer(40 * GIB), gpuBudgets: [40 * GIB], detectedGpus: 1 }),
    );
    expect(p.gpuLayers.value).toEqual({ layers: 33, all: true });
    expect(p.context.decision.source).toBe("auto");
  });

  test("a small GPU takes what it holds, and the context stays modest", () => {
    const p = decideContextAndLayers(
      input({
        fit: perLayer(10.5 * GIB),
        gpuBudgets: [10.5 * GIB],
        detectedGpus: 1,
        model: { ...MODEL, context_train: 32768 },
      }),
    );
    expect(p.gpuLayers.value).toEqual({ layers: 10, all: false });
    expect(p.context.value).toBe(8192);
  });

  test("explicit values: capped context with its warning, configured layers, both marked config", () => {
    const p = decideContextAndLayers(
      input({
        requested: { context: 100000, gpu_layers: 5 },
        fit: perLayer(40 * GIB),
        gpuBudgets: [40 * GIB],
        detectedGpus: 1,
      }),
    );
    expect(p.context.value).toBe(8192);
    expect(p.context.decision.source).toBe("config");
    expect(p.gpuLayers.value.layers).toBe(5);
    expect(p.gpuLayers.decision.source).toBe("config");
    expect(p.warnings[0]).toContain("capped to 8192");
  });

  test("layers asked of a machine with no usable GPU: model_plan_error before any search", () => {
    const fit = perLayer();
    const e = coreErrorOf(() =>
      decideContextAndLayers(input({ fit, requested: { context: "auto", gpu_layers: 4 }, detectedGpus: 1 })),
    );
    expect(e.data?.key).toBe("model.gpu_layers");
    expect(fit.calls).toEqual([]);
  });

  test("the trial of the chosen launch comes back for the device table", () => {
    const p = decideContextAndLayers(
      input({ fit: perLayer(40 * GIB), gpuBudgets: [40 * GIB], detectedGpus: 1 }),
    );
    expect(p.trial.est.gpus[0]!.total).toBe(33 * GIB);
  });
});
