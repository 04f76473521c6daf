import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import type { HardwareSnapshot } from "../../src/plan/hardware.ts";
import { planInputs } from "../../src/plan/launch.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import { planFor } from "../../src/plan/planner.ts";
import { type ProjectorChoice, type ProjectorInfo, projectorInfo } from "../../src/plan/projector.ts";
import { renderPlan } from "../../src/plan/render.ts";
import { summariseModel } from "../../src/plan/report.ts";
import { mmproj, TINY_MMPROJ_PIXTRAL } from "../fixtures/gguf-mmproj.ts";
import { tinyLlama, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB, testGpu } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** The machine the projector is planned on: 16 GiB, 12 of it free. */
const hw = (gpus: HardwareSnapshot["gpus"] = []): HardwareSnapshot =>
  cpuOnlyMachine({ ram: { total_bytes: 16 * GIB, available_bytes: 12 * GIB }, gpus });
const GPU = testGpu();

const config = (model: Record<string, unknown> = {}) =>
  ConfigSchema.parse({ model: { path: "/m/model.gguf", context: 2048, ...model } });

async function fixture(spec = mmproj()): Promise<{ model: ModelInfo; projector: ProjectorInfo }> {
  using dir = tmpdir();
  const model = modelInfo(await readGgufHeader(writeGguf(dir.path, "model.gguf", tinyLlama())));
  const read = projectorInfo(await readGgufHeader(writeGguf(dir.path, "mmproj.gguf", spec)));
  if ("problem" in read) throw new Error(read.detail);
  return { model, projector: read };
}

const found = (info: ProjectorInfo): ProjectorChoice => ({ kind: "found", source: "auto", info });

describe('the plan with a projector (docs/plan.md "The projector")', () => {
  test("--mmproj in argv, its bytes on the CPU's usage, vision true in the report", async () => {
    const { model, projector } = await fixture();
    const { plan, launch } = planFor(model, hw(), config(), [], undefined, found(projector));
    const i = plan.argv.indexOf("--mmproj");
    expect(plan.argv[i + 1]).toBe(projector.path);
    expect(launch.mmproj).toEqual({ path: projector.path, image_tokens: { max: null, min: null } });
    expect(plan.vision).toBe(true);
    const cpu = plan.devices.find((d) => d.id === "cpu")!;
    expect(cpu.usage.projector).toBe(plan.projector!.weights_bytes + plan.projector!.compute_bytes);
    expect(plan.projector).toMatchObject({
      path: projector.path,
      source: "auto",
      projector_type: "mlp",
      width: 64,
      model_width: 64,
      device: "cpu",
      image_tokens: "fixed",
      image_tokens_max: 64,
      image_max_tokens: null,
    });
    expect(plan.projector!.weights_bytes).toBe(projector.weights_bytes);
    // Each decision's flags are argv's, in argv's order.
    expect(plan.decisions.flatMap((d) => d.flags)).toEqual(plan.argv.slice(2));
    expect(plan.decisions.find((d) => d.name === "mmproj")!.reason).toContain("projection width 64");
  });

  test("the usage's total is what it was without the projector plus the projector", async () => {
    const { model, projector } = await fixture();
    const without = planFor(model, hw(), config(), []).plan;
    const withIt = planFor(model, hw(), config(), [], undefined, found(projector)).plan;
    const cpu = (p: typeof without) => p.devices.find((d) => d.id === "cpu")!;
    const n = withIt.projector!.weights_bytes + withIt.projector!.compute_bytes;
    expect(
      cpu(withIt).usage.total -
        cpu(without).usage.total -
        (cpu(withIt).usage.cache_ram - cpu(without).usage.cache_ram),
    ).toBe(n);
    expect(without.vision).toBe(false);
    expect(without.projector).toBeNull();
    expect(without.argv).not.toContain("--mmproj");
  });

  test("held on the first GPU where there is one", async () => {
    const { model, projector } = await fixture();
    const { plan } = planFor(model, hw([GPU]), config(), [], undefined, found(projector));
    expect(plan.projector!.device).toBe("gpu0");
    expect(plan.devices.find((d) => d.id === "gpu0")!.usage.projector).toBeGreaterThan(0);
    expect(plan.devices.find((d) => d.id === "cpu")!.usage.projector).toBe(0);
  });

  test("on a unified GPU its bytes leave RAM too", async () => {
    const { model, projector } = await fixture();
    const unified = hw([{ ...GPU, vendor: "apple", backend: "metal", unified: true }]);
    const withIt = planFor(model, unified, config(), [], undefined, found(projector)).plan;
    const without = planFor(model, unified, config(), []).plan;
    const n = withIt.projector!.weights_bytes + withIt.projector!.compute_bytes;
    const free = (p: typeof without, id: string) => p.devices.find((d) => d.id === id)!.free_after_bytes;
    expect(free(without, "gpu0") - free(withIt, "gpu0")).toBe(n);
    const ram = (p: typeof without) => p.devices.find((d) => d.id === "cpu")!;
    // The RAM prompt cache is sized from what RAM has left, so compare before it.
    expect(
      free(without, "cpu") +
        ram(without).usage.cache_ram -
        (free(withIt, "cpu") + ram(withIt).usage.cache_ram),
    ).toBe(n);
  });

  test("pixtral at 2048 tokens a slot: --image-max-tokens 256, so one image takes at most 512 (recording 109)", async () => {
    const { model, projector } = await fixture(mmproj(TINY_MMPROJ_PIXTRAL));
    const { plan } = planFor(model, hw(), config(), [], undefined, found(projector));
    expect(plan.argv.join(" ")).toContain(`--mmproj ${projector.path} --image-max-tokens 256`);
    expect(plan.projector).toMatchObject({
      image_tokens: "by_size",
      image_max_tokens: 256,
      image_tokens_max: 512,
    });
    expect(plan.projector!.image_tokens_max!).toBeLessThanOrEqual(plan.context_per_slot / 4);
  });

  test("auto passing a projector over is a warning in the plan, and no vision", async () => {
    const { model } = await fixture();
    const none: ProjectorChoice = {
      kind: "none",
      reason: "r",
      warning: "mmproj: auto used no projector beside the model: x",
    };
    const { plan } = planFor(model, hw(), config(), [], undefined, none);
    expect(plan.warnings).toContain(none.warning!);
    expect(plan.vision).toBe(false);
    expect(plan.decisions.find((d) => d.name === "mmproj")).toMatchObject({ value: null, flags: [] });
  });
});

describe("planInputs asks for the projector of a chat model only", () => {
  const deps = (model: ModelInfo, seen: string[]) => ({
    probe: async () => hw(),
    readModel: async () => model,
    findProjector: async (setting: string): Promise<ProjectorChoice> => {
      seen.push(setting);
      return { kind: "none", reason: "test" };
    },
  });

  test("the model's mmproj setting is handed to findProjector", async () => {
    const { model } = await fixture();
    const seen: string[] = [];
    await planInputs(config({ mmproj: "/p/mmproj.gguf" }), deps(model, seen));
    expect(seen).toEqual(["/p/mmproj.gguf"]);
  });

  test("the projector is looked for while the probe still runs, not after it", async () => {
    // The probe's device list takes tens of ms (a process start): a cold chat's spawn waited for
    // the projector's lookup after it (docs/performance.md, "Parses made once").
    const { model } = await fixture();
    let probed: ((h: HardwareSnapshot) => void) | undefined;
    const seen: string[] = [];
    const plan = planInputs(config({ mmproj: "auto" }), {
      ...deps(model, seen),
      findServer: async () => "/opt/llama/llama-server",
      probe: () => new Promise<HardwareSnapshot>((resolve) => (probed = resolve)),
    });
    for (let i = 0; i < 50 && (seen.length === 0 || !probed); i++) await Promise.resolve();
    expect(probed).toBeDefined();
    expect(seen).toEqual(["auto"]);
    probed?.(hw());
    expect((await plan).launch).toBeDefined();
  });

  test("an embedding model's plan looks for none", async () => {
    const { model } = await fixture();
    const seen: string[] = [];
    await planInputs({ ...config(), model_kind: "embedding" }, deps(model, seen)).catch(() => undefined);
    expect(seen).toEqual([]);
  });
});

test("the human plan shows the projector's bytes in its device's bar and a Vision line", async () => {
  const { model, projector } = await fixture(mmproj(TINY_MMPROJ_PIXTRAL));
  const { plan } = planFor(model, hw(), config(), [], undefined, found(projector));
  const text = renderPlan({ fits: true, model: summariseModel(model), hardware: hw(), plan }, false);
  expect(text).toContain("▞ projector");
  expect(text).toMatch(/cpu .*\n.*projector \d/);
  expect(text).toContain(`Vision    ${projector.path}: projector pixtral (F16), width 64`);
  expect(text).toContain("one image at most 512 tokens");
  const without = renderPlan(
    {
      fits: true,
      model: summariseModel(model),
      hardware: hw(),
      plan: planFor(model, hw(), config(), []).plan,
    },
    false,
  );
  expect(without).not.toContain("Vision");
});
