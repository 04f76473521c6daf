import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import type { ModelConfig } from "../../src/config/model-entry.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { testPlan } from "../runtime/helpers/harness.ts";

// One model of several (server/model-runtime.ts) whose first start runs out of GPU memory
// (docs/supervisor.md, "Out of GPU memory at start-up"): the scheduler's plan is launched first,
// and the replan asks the planner again with the hint, rather than reusing that plan.

const CUDA_OUT_OF_MEMORY =
  "E ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4403.49 MiB on device 0: cudaMalloc failed: out of memory";

describe.skipIf(process.platform === "win32")("a model of several that runs out of GPU memory", () => {
  test("is planned again with gpu_out_of_memory, not relaunched on the scheduler's plan", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const binary = writeFakeLlamaServer(dir.path, {
      FAKE_LLAMA_LOAD_MS: "20",
      FAKE_LLAMA_FAIL_START: CUDA_OUT_OF_MEMORY,
      FAKE_LLAMA_FAIL_ABOVE_NGL: "25",
      FAKE_LLAMA_ARGV_LOG: argvLog,
    });
    const model = writeFakeModel(dir.path);
    const config = ConfigSchema.parse({
      app: { data_dir: join(dir.path, "data") },
      llama: { binary, idle_sleep_s: 0 },
      model: { path: model },
      models: [{ name: "big", path: model }],
    });
    const asked: (number | undefined)[] = [];
    const outOfMemory = new Map<string, number>();
    const make = () =>
      makeModelRuntime("big", {
        config: () => config,
        heldByOthers: () => [],
        reuse: () => ({}) as PromptReuse,
        outOfMemory,
        plan: async (c: ModelConfig) => {
          asked.push(c.gpu_out_of_memory);
          const layers = 33 - 10 * (c.gpu_out_of_memory ?? 0);
          return {
            plan: { devices: [] },
            launch: testPlan(model, { gpu_layers: layers, slot_save_path: null }),
          };
        },
      });
    const runtime = make();
    await runtime.plannedBytes();
    const lease = await runtime.acquire(new AbortController().signal);
    try {
      expect(asked).toEqual([undefined, 1]);
      const argv = readFileSync(argvLog, "utf8").split("\n");
      expect(argv[argv.indexOf("-ngl") + 1]).toBe("23");
    } finally {
      lease.release();
      await runtime.stop();
    }
    // Unloaded and loaded again (a new runtime): planned with the margin from the start, the
    // scheduler's figures included, and launched once, without running out again.
    expect(outOfMemory.get("big")).toBe(1);
    asked.length = 0;
    const again = make();
    await again.plannedBytes();
    const second = await again.acquire(new AbortController().signal);
    try {
      expect(asked).toEqual([1]);
      expect(again.snapshot?.().outOfMemoryStarts).toBe(0);
    } finally {
      second.release();
      await again.stop();
    }
  });
});
