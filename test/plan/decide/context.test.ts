import { describe, expect, test } from "bun:test";
import {
  CONTEXT_LADDER,
  type ContextSearch,
  capContext,
  chooseContext,
  decideContext,
  ladderSteps,
} from "../../../src/plan/decide/context.ts";
import type { Trial } from "../../../src/plan/decide/fit.ts";
import { coreErrorOf } from "../../fixtures/core-error.ts";
import { fakeFitter, trial } from "./fake-fit.ts";

function search(
  rule: (ctx: number, ngl: number) => Trial,
  over: Partial<ContextSearch> = {},
): ContextSearch & { calls: [number, number, number][] } {
  const fit = fakeFitter((ctx, ngl) => rule(ctx, ngl));
  return {
    fit,
    calls: fit.calls,
    layersFor: () => 0,
    slots: 1,
    train: 131072,
    maxNgl: 33,
    gpus: false,
    explicitNgl: null,
    architecture: "llama",
    ...over,
  };
}

describe("capContext", () => {
  test("auto is null; a context up to the trained one is kept; above it is capped, with a warning", () => {
    expect(capContext("auto", 4096)).toEqual({ ctx: null, warnings: [] });
    expect(capContext(4096, 4096)).toEqual({ ctx: 4096, warnings: [] });
    const capped = capContext(100000, 8192);
    expect(capped.ctx).toBe(8192);
    expect(capped.warnings).toEqual([
      "model.context 100000 is above the model's trained context 8192: capped to 8192",
    ]);
  });
});

describe("ladderSteps", () => {
  test("the ladder up to the trained context, largest first; never past its top", () => {
    expect(ladderSteps(8192)).toEqual([8192, 4096, 2048]);
    expect(ladderSteps(131072)).toEqual([...CONTEXT_LADDER].reverse());
    expect(ladderSteps(1000)).toEqual([1000]);
    expect(CONTEXT_LADDER).toEqual([2048, 4096, 8192, 16384, 32768]);
  });
});

describe("chooseContext", () => {
  test("an explicit context is taken as asked, or is model_plan_error naming model.context", () => {
    const ok = chooseContext(
      search(() => trial(true, false)),
      6000,
    );
    expect(ok).toMatchObject({ ctx: 6000, ngl: 0, why: "model.context", warnings: [] });
    const e = coreErrorOf(() =>
      chooseContext(
        search(() => trial(false, false)),
        6000,
      ),
    );
    expect(e.code).toBe("model_plan_error");
    expect(e.data?.key).toBe("model.context");
  });

  test("auto: the largest step that fits with room", () => {
    const c = chooseContext(
      search((ctx) => trial(true, ctx <= 8192)),
      null,
    );
    expect(c.ctx).toBe(8192);
    expect(c.why).toContain("leaving room for the rest of the machine");
  });

  test("auto: the whole model on the GPU first, at 4096 or more", () => {
    const s = search((ctx, ngl) => trial(true, ngl === 33 ? ctx <= 4096 : true), {
      gpus: true,
      layersFor: () => 20,
    });
    const c = chooseContext(s, null);
    expect(c).toMatchObject({ ctx: 4096, ngl: 33 });
    expect(c.why).toContain("on the GPU with room to spare");
  });

  test("auto: the whole model only at 2048 is not worth it; a partial offload stays at 8192 or less", () => {
    const s = search((ctx, ngl) => trial(true, ngl === 33 ? ctx <= 2048 : true), {
      gpus: true,
      layersFor: () => 20,
    });
    const c = chooseContext(s, null);
    expect(c).toMatchObject({ ctx: 8192, ngl: 20 });
    // The whole-on-GPU search stopped below 4096; the partial one skipped the steps above 8192.
    expect(s.calls.filter(([, ngl]) => ngl === 33).map(([ctx]) => ctx)).toEqual([32768, 16384, 8192, 4096]);
    expect(s.calls.filter(([, ngl]) => ngl === 20).map(([ctx]) => ctx)).toEqual([8192]);
  });

  test("an explicit layer count short of all skips the whole-on-GPU search", () => {
    const s = search(() => trial(true, true), { gpus: true, explicitNgl: 10, layersFor: () => 10 });
    chooseContext(s, null);
    expect(s.calls.some(([, ngl]) => ngl === 33)).toBe(false);
  });

  test("nothing roomy: the smallest useful context, with a warning", () => {
    const c = chooseContext(
      search(() => trial(true, false), { train: 4096 }),
      null,
    );
    expect(c.ctx).toBe(2048);
    expect(c.warnings).toEqual([
      "memory is tight: the plan uses the smallest useful context and leaves little room",
    ]);
    expect(
      chooseContext(
        search(() => trial(true, false), { train: 1000 }),
        null,
      ).ctx,
    ).toBe(1000);
  });

  test("nothing fits: model_plan_error about the smallest useful context", () => {
    const e = coreErrorOf(() =>
      chooseContext(
        search(() => trial(false, false)),
        null,
      ),
    );
    expect(e.code).toBe("model_plan_error");
    expect(e.message).toContain("even the smallest useful context (2048 tokens)");
    expect(e.data?.key).toBeUndefined();
  });
});

describe("decideContext", () => {
  test("per slot, padded to 256 cells; -c is the total", () => {
    const one = decideContext({ ctx: 1000, why: "w" }, 2048, 1, false);
    expect(one.value).toBe(1024);
    expect(one.decision).toMatchObject({
      name: "context",
      value: 1024,
      source: "auto",
      flags: ["-c", "1024"],
    });
    expect(one.decision.reason).toBe("1024 tokens per slot (trained: 2048); w");
    const three = decideContext({ ctx: 4096, why: "model.context" }, 8192, 3, true);
    expect(three.decision).toMatchObject({ source: "config", flags: ["-c", "12288"] });
    expect(three.decision.reason).toEndWith("; -c is the total, 4096 × 3 slots");
  });
});
