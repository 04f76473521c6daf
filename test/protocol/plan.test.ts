import { describe, expect, test } from "bun:test";
import { z } from "zod";
import { ConfigSchema, LlamaSchema } from "../../src/config/schema.ts";
import { KV_CACHE_TYPES } from "../../src/plan/ggml-types.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import { makePlan } from "../../src/plan/planner.ts";
import { probeHardware, realProbeEnv } from "../../src/plan/probe.ts";
import type { buildPlanReport } from "../../src/plan/report.ts";
import { summariseModel } from "../../src/plan/report.ts";
import { ChatParamsSchema } from "../../src/protocol/chat.ts";
import { checkedParams } from "../../src/protocol/params-check.ts";
import {
  HardwareSnapshotSchema,
  KvCacheTypeSchema,
  PlanParamsSchema,
  type PlanReport,
  PlanReportSchema,
  PlanSchema,
} from "../../src/protocol/plan.ts";
import { deepseek2, gemma3, llama7b, mixtral8x7b, sparse40g, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The hand-built report and the schema's type are the same type, both ways.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const sameType: Same<Awaited<ReturnType<typeof buildPlanReport>>, PlanReport> = true;

const gpu = (over: Record<string, unknown> = {}) => ({
  index: 0,
  vendor: "nvidia" as const,
  name: "Test GPU",
  backend: "cuda" as const,
  total_bytes: 24 * GIB,
  free_bytes: 23 * GIB,
  unified: false,
  driver: "550",
  compute_capability: "8.6",
  ...over,
});
const MACHINES = {
  cpu: cpuOnlyMachine(),
  gpu: cpuOnlyMachine({ gpus: [gpu()] }),
  twoGpus: cpuOnlyMachine({ gpus: [gpu(), gpu({ index: 1, total_bytes: 8 * GIB, free_bytes: 6 * GIB })] }),
  apple: cpuOnlyMachine({
    os: "darwin",
    arch: "arm64",
    cpu: { model: null, logical: 8, physical: null, flags: ["neon"] },
    ram: { total_bytes: 16 * GIB, available_bytes: null },
    gpus: [
      gpu({
        vendor: "apple",
        backend: "metal",
        unified: true,
        total_bytes: (16 * GIB * 2) / 3,
        free_bytes: (16 * GIB * 2) / 3,
        compute_capability: null,
      }),
    ],
  }),
};
const CONFIGS = [
  {},
  { llama: { parallel: 2, extra_args: ["--temp", "0.2"], mmap: false, mlock: true, threads: 3 } },
  { llama: { cache_type_k: "q8_0", cache_type_v: "q8_0" }, model: { context: 4096, max_tokens: 256 } },
];

let cached: ModelInfo[] | undefined;
async function models(): Promise<ModelInfo[]> {
  if (cached) return cached;
  using dir = tmpdir();
  const specs = { l7: llama7b(), moe: mixtral8x7b(), g3: gemma3(), ds: deepseek2() };
  cached = await Promise.all(
    Object.entries(specs).map(async ([name, spec]) =>
      modelInfo(await readGgufHeader(writeGguf(dir.path, `${name}.gguf`, spec))),
    ),
  );
  return cached;
}

describe("PlanReportSchema describes exactly what plan returns", () => {
  test("every report the planner makes parses strictly, unchanged", async () => {
    expect(sameType).toBe(true);
    let checked = 0;
    for (const m of await models()) {
      for (const hardware of Object.values(MACHINES)) {
        for (const raw of CONFIGS) {
          let plan: PlanReport["plan"];
          try {
            plan = makePlan(m, hardware, ConfigSchema.parse(raw));
          } catch {
            continue; // does not fit this machine: an error, not a report
          }
          const report = { fits: true as const, model: summariseModel(m), hardware, plan };
          expect(PlanReportSchema.parse(report)).toEqual(report);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(30);
  });

  test("the probe's snapshot of this machine parses", async () => {
    const hw = await probeHardware();
    expect(HardwareSnapshotSchema.parse(hw)).toEqual(hw);
  });

  test("a real GPU: nvidia-smi's answer recorded on an H200 probes, plans and parses", async () => {
    const H200 = "0, NVIDIA H200, 143771, 143156, 580.159.04, 9.0\n";
    const hardware = await probeHardware({
      ...realProbeEnv,
      platform: "linux",
      arch: "x64",
      run: async (cmd) =>
        cmd === "nvidia-smi" ? { kind: "exit", code: 0, stdout: H200, stderr: "" } : { kind: "absent" },
    });
    expect(hardware.gpus[0]).toMatchObject({ name: "NVIDIA H200", compute_capability: "9.0" });
    using dir = tmpdir();
    const m = modelInfo(await readGgufHeader(writeGguf(dir.path, "big.gguf", sparse40g())));
    const plan = makePlan(m, hardware, ConfigSchema.parse({}));
    expect(plan.gpu_layers_all).toBe(true);
    const report = { fits: true as const, model: summariseModel(m), hardware, plan };
    expect(PlanReportSchema.parse(report)).toEqual(report);
  });

  test("strict: an unknown field or decision is refused", async () => {
    const [m] = await models();
    const plan = makePlan(m!, MACHINES.cpu, ConfigSchema.parse({}));
    expect(PlanSchema.safeParse({ ...plan, extra: 1 }).success).toBe(false);
    const decisions = [...plan.decisions, { ...plan.decisions[0]!, name: "sampler" }];
    expect(PlanSchema.safeParse({ ...plan, decisions }).success).toBe(false);
    const devices = [{ ...plan.devices[0]!, note: "x" }];
    expect(PlanSchema.safeParse({ ...plan, devices }).success).toBe(false);
  });

  test("its JSON Schema closes every object", () => {
    const json = z.toJSONSchema(PlanReportSchema) as Record<string, any>;
    expect(json.additionalProperties).toBe(false);
    const plan = json.properties.plan;
    expect(plan.additionalProperties).toBe(false);
    expect(plan.properties.decisions.items.additionalProperties).toBe(false);
    expect(plan.properties.devices.items.properties.usage.additionalProperties).toBe(false);
    expect(json.properties.hardware.properties.gpus.items.additionalProperties).toBe(false);
  });

  test("its KV cache types are the planner's and the config's, in the same order", () => {
    expect(KvCacheTypeSchema.options).toEqual(
      Object.keys(KV_CACHE_TYPES) as typeof KvCacheTypeSchema.options,
    );
    expect(LlamaSchema.unwrap().shape.cache_type_k.unwrap().options).toEqual(KvCacheTypeSchema.options);
    expect(LlamaSchema.unwrap().shape.cache_type_v.unwrap().options).toEqual(KvCacheTypeSchema.options);
  });
});

describe("plan's params", () => {
  test("a param not listed is refused naming it, as chat's and the conversation methods' are: a misspelled model planned the configured one", () => {
    const refusal = (schema: Parameters<typeof checkedParams>[0], params: object) => {
      try {
        checkedParams(schema, params);
      } catch (err) {
        return err as { code: string; message: string; data: { field: string } };
      }
      throw new Error("not refused");
    };
    expect(refusal(PlanParamsSchema, { model: "m.gguf", modle: "x" })).toMatchObject({
      code: "invalid_request",
      message: "params.modle: unknown key",
      data: { field: "modle" },
    });
    expect(refusal(ChatParamsSchema, { input: "hi", bogus: "x" }).data.field).toBe("bogus");
    expect(checkedParams(PlanParamsSchema, { model: "m.gguf" })).toEqual({ model: "m.gguf" });
    // What is listed is still checked.
    expect(() => checkedParams(PlanParamsSchema, { model: "\ud800" })).toThrow(/params\.model/);
    expect(() => checkedParams(PlanParamsSchema, { model: "" })).toThrow(/params\.model/);
  });
});
