import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/config/load.ts";
import { configForModel } from "../../src/config/model-entry.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { PLAN_DIALECT, renderArgv } from "../../src/plan/argv.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { planLaunch } from "../../src/plan/launch.ts";
import { modelInfo } from "../../src/plan/model.ts";
import { type PlanConfig, planFor } from "../../src/plan/planner.ts";
import { PlanSchema } from "../../src/protocol/plan.ts";
import { bertModel } from "../fixtures/gguf-bert.ts";
import { denseModel, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, testGpu } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A model of kind embedding planned as one (docs/plan.md "Embedding models"): before, tiny-embed
// was planned as a chat model and llama-server, started so, aborted (issue 28).

async function bert() {
  using dir = tmpdir("local-ai-embed-planner-");
  return modelInfo(await readGgufHeader(writeGguf(dir.path, "e.gguf", bertModel())));
}

const embeddingConfig = (over: Partial<PlanConfig["model"]> = {}): PlanConfig => {
  const config = ConfigSchema.parse({});
  return { ...config, model: { ...config.model, ...over }, model_kind: "embedding" };
};

const gpuMachine = (gpus: number) =>
  cpuOnlyMachine({
    gpus: Array.from({ length: gpus }, (_, index) => testGpu(index)),
  });

describe("planning a model of kind embedding", () => {
  test("--embeddings, its pooling and batch; no KV cache types, no --jinja, --cache-ram 0; the report says so", async () => {
    const model = await bert();
    const { launch, plan } = planFor(model, cpuOnlyMachine(), embeddingConfig());
    expect(launch.embedding).toEqual({ pooling: "mean", batch: 512, causal: false });
    const argv = renderArgv(launch, PLAN_DIALECT);
    expect(argv.join(" ")).toContain("-np 4 -c 2048 --embeddings --pooling mean -b 512 -ub 512 -ngl 0");
    expect(argv.some((f) => f.startsWith("--cache-type"))).toBe(false);
    expect(argv).not.toContain("--jinja");
    expect(argv.join(" ")).toContain("--cache-ram 0");
    // The report's lines and argv are one rendering.
    expect(plan.argv).toEqual(["-m", model.path, ...plan.decisions.flatMap((d) => d.flags)]);
    expect(plan.embedding).toEqual(launch.embedding!);
    expect(PlanSchema.parse(plan)).toEqual(plan);
    // An encoder's memory is decideEmbedding's, not the chat estimator's best effort.
    expect(plan.warnings.join(" ")).not.toContain("not one the planner knows");
    const cpu = plan.devices.find((d) => d.id === "cpu")!;
    expect(cpu.usage).toMatchObject({ kv_cache: 0, cache_ram: 0, weights: model.weights_bytes });
    expect(cpu.usage.compute).toBeGreaterThan(0);
  });

  test("model.context caps the input; the kind absent plans a chat model as before", async () => {
    const model = await bert();
    const capped = planFor(model, cpuOnlyMachine(), embeddingConfig({ context: 128 }));
    expect(capped.launch.embedding!.batch).toBe(128);
    const { model_kind: _, ...chat } = embeddingConfig();
    const asChat = planFor(model, cpuOnlyMachine(), chat);
    expect(asChat.launch.embedding ?? null).toBeNull();
    expect(asChat.plan.embedding).toBeNull();
    expect(renderArgv(asChat.launch, PLAN_DIALECT)).not.toContain("--embeddings");
  });

  // A decoder embedder of 32,768 positions (Qwen3-Embedding-0.6B's shape) wants ~15 GiB of KV
  // cache for its four slots at that length: a laptop got model_plan_error, and the embedding
  // model, memory's vectors with it, never ran.
  test("the longest input halves until the plan fits the machine, with a warning; one the config asks for is kept", async () => {
    using dir = tmpdir("local-ai-embed-fit-");
    const spec = denseModel({
      arch: "qwen3",
      layers: 28,
      embd: 1024,
      heads: 16,
      kvHeads: 8,
      headDim: 128,
      ff: 3072,
      vocab: 151669,
      ctx: 32768,
      type: 1,
    });
    const model = modelInfo(await readGgufHeader(writeGguf(dir.path, "q.gguf", spec)));
    const machine = (gib: number) =>
      cpuOnlyMachine({ ram: { total_bytes: gib * 2 ** 30, available_bytes: (gib - 2) * 2 ** 30 } });
    const roomy = planFor(model, machine(32), embeddingConfig());
    expect(roomy.launch.embedding!.batch).toBe(32768);
    expect(roomy.plan.warnings.join(" ")).not.toContain("inputs of up to");
    const laptop = planFor(model, machine(8), embeddingConfig());
    expect(laptop.launch.embedding!.batch).toBe(4096);
    expect(laptop.plan.warnings.join(" ")).toContain("inputs of up to 4096 tokens here, not its 32768");
    expect(renderArgv(laptop.launch, PLAN_DIALECT).join(" ")).toContain(
      "-c 16384 --embeddings --pooling mean -b 4096",
    );
    expect(() => planFor(model, machine(8), embeddingConfig({ context: 32768 }))).toThrow(/does not fit/);
    expect(() => planFor(model, machine(4), embeddingConfig())).toThrow(/does not fit/);
  });

  test("on a GPU it runs whole on the first one, the token embeddings on the CPU", async () => {
    const model = await bert();
    const one = planFor(model, gpuMachine(1), embeddingConfig());
    expect(one.launch.gpu_layers).toBe(model.n_layer + 1);
    expect(one.launch.tensor_split).toBeNull();
    const gpu0 = one.plan.devices.find((d) => d.id === "gpu0")!;
    const cpu = one.plan.devices.find((d) => d.id === "cpu")!;
    expect(gpu0.usage.weights).toBe(model.layers.reduce((a, l) => a + l.weights_bytes, 0));
    expect(gpu0.usage.weights + cpu.usage.weights).toBe(model.weights_bytes);
    expect(cpu.usage.weights).toBeGreaterThanOrEqual(model.token_embd_bytes);
    expect(gpu0.usage).toMatchObject({ kv_cache: 0, layers: model.n_layer });
    const two = planFor(model, gpuMachine(2), embeddingConfig());
    expect(two.launch.tensor_split).toEqual([1, 0]);
    expect(two.plan.argv.join(" ")).toContain("--tensor-split 1,0");
    expect(planFor(model, gpuMachine(1), embeddingConfig({ gpu_layers: 0 })).launch.gpu_layers).toBe(0);
  });

  test("an entry of kind embedding is planned so from its config (configForModel carries the kind)", async () => {
    using dir = tmpdir();
    writeGguf(dir.path, "main.gguf", bertModel());
    writeGguf(dir.path, "embed.gguf", bertModel());
    writeFileSync(
      join(dir.path, "config.yaml"),
      "model: {path: ./main.gguf}\nmodels:\n  - {name: embed, path: ./embed.gguf, kind: embedding}\n",
    );
    const { config } = loadConfig("config.yaml", dir.path);
    const deps = { readModel: defaultPlanDeps.readModel, probe: async () => cpuOnlyMachine() };
    expect(configForModel(config, "embed")!.model_kind).toBe("embedding");
    expect((await planLaunch(configForModel(config, "embed")!, deps)).embedding?.pooling).toBe("mean");
    expect((await planLaunch(configForModel(config, "default")!, deps)).embedding ?? null).toBeNull();
  });
});
