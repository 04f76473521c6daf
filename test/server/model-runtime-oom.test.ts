import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import type { ModelConfig } from "../../src/config/model-entry.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { testPlan } from "../runtime/helpers/harness.ts";

// One model of several (server/model-runtime.ts) whose starts run out of GPU memory
// (docs/supervisor.md, "Out of GPU memory at start-up"): the scheduler's plan is launched first,
// the replan asks the planner again with the hint, and the count outlives the runtime (a model
// unloaded and loaded again), at most three.

const CUDA_OUT_OF_MEMORY =
  "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory";

/**
 * A stand-in that runs out of GPU memory above `failAboveNgl` layers, one model `big` of a config
 * with several, and a planner that puts 33 layers on the GPU less 10 per start that ran out.
 */
function fixture(dir: string, failAboveNgl: number, argvLog?: string) {
  const binary = writeFakeLlamaServer(dir, {
    FAKE_LLAMA_LOAD_MS: "20",
    FAKE_LLAMA_FAIL_START: CUDA_OUT_OF_MEMORY,
    FAKE_LLAMA_FAIL_ABOVE_NGL: String(failAboveNgl),
    ...(argvLog ? { FAKE_LLAMA_ARGV_LOG: argvLog } : {}),
  });
  const model = writeFakeModel(dir);
  const config = ConfigSchema.parse({
    app: { data_dir: join(dir, "data") },
    llama: { binary, idle_sleep_s: 0 },
    model: { path: model },
    models: [{ name: "big", path: model }],
  });
  const asked: (number | undefined)[] = [];
  const plan = async (c: ModelConfig) => {
    asked.push(c.gpu_out_of_memory);
    const layers = 33 - 10 * (c.gpu_out_of_memory ?? 0);
    // A MiB of the GPU a layer, so that what a plan holds tells the plans apart.
    const devices = [
      { id: "gpu0", usage: { total: layers * MIB }, budget_bytes: 100 * MIB },
    ] as unknown as DevicePlan[];
    return { plan: { devices }, launch: testPlan(model, { gpu_layers: layers, slot_save_path: null }) };
  };
  const runtime = (outOfMemory: Map<string, number>) =>
    makeModelRuntime("big", {
      config: () => config,
      heldByOthers: () => [],
      reuse: () => ({}) as PromptReuse,
      outOfMemory,
      plan,
    });
  return { config, asked, plan, runtime };
}

const never = () => new AbortController().signal;
const MIB = 1024 ** 2;

describe.skipIf(process.platform === "win32")("a model of several that runs out of GPU memory", () => {
  test("is planned again with gpu_out_of_memory, not relaunched on the scheduler's plan; loaded again, with the margin from the start", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const f = fixture(dir.path, 25, argvLog);
    const outOfMemory = new Map<string, number>();
    const runtime = f.runtime(outOfMemory);
    expect((await runtime.plannedBytes()).bytes).toEqual({ gpu0: 33 * MIB });
    const lease = await runtime.acquire(never());
    try {
      expect(f.asked).toEqual([undefined, 1]);
      // The server running holds what its replan said, not the plan the scheduler admitted.
      expect(runtime.heldBytes?.()).toEqual({ gpu0: 23 * MIB });
      const argv = readFileSync(argvLog, "utf8").split("\n");
      expect(argv[argv.indexOf("-ngl") + 1]).toBe("23");
    } finally {
      lease.release();
      await runtime.stop();
    }
    // Unloaded and loaded again (a new runtime): planned with the margin from the start, the
    // scheduler's figures included, and launched once, without running out again.
    expect(outOfMemory.get("big")).toBe(1);
    f.asked.length = 0;
    const again = f.runtime(outOfMemory);
    await again.plannedBytes();
    const second = await again.acquire(never());
    try {
      expect(f.asked).toEqual([1]);
      // status says what the margin is counted from: the earlier load's start that ran out.
      expect(again.snapshot?.().outOfMemoryStarts).toBe(1);
    } finally {
      second.release();
      await again.stop();
    }
  });

  test("through several models: a reload after an unload plans with the margin", async () => {
    await using dir = tmpdir();
    const f = fixture(dir.path, 25);
    const reuse = { saveBeforeUnload: async () => {}, stop: async () => {} } as unknown as PromptReuse;
    const several = new SeveralModels({
      config: () => f.config,
      reuse: () => reuse,
      pinnedProblem: async () => null,
      plan: f.plan,
    });
    const big = several.provider({ kind: "path", name: "big" });
    try {
      const row = () => several.status().models.find((m) => m.name === "big");
      (await big.acquire(never())).release();
      expect(f.asked).toEqual([undefined, 1]);
      // It holds what its replan holds (23 layers), not the 33 its load was admitted with.
      expect(row()?.memory_bytes).toBe(23 * MIB);
      await several.scheduler.unload("big");
      (await big.acquire(never())).release();
      expect(f.asked).toEqual([undefined, 1, 1]);
      expect(several.outOfMemoryStarts("big")).toBe(1);
      // status's row says so, loaded (its layers) and unloaded (the count it will plan with).
      expect(row()).toMatchObject({ gpu_layers: 23, gpu_out_of_memory: 1 });
      await several.scheduler.unload("big");
      expect(row()).toMatchObject({ gpu_layers: null, gpu_out_of_memory: 1 });
    } finally {
      await several.stop();
    }
  });

  test("the margin carried across loads stays at most three: a load that still runs out then fails", async () => {
    await using dir = tmpdir();
    const f = fixture(dir.path, 0);
    const outOfMemory = new Map([["big", 3]]);
    const runtime = f.runtime(outOfMemory);
    await runtime.plannedBytes();
    try {
      const err = await runtime.acquire(never()).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: "model_plan_error" });
      expect(f.asked).toEqual([3, 3]);
      expect(outOfMemory.get("big")).toBe(3);
    } finally {
      await runtime.stop();
    }
  });
});
