import { describe, expect, test } from "bun:test";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import type { StartFailure } from "../../src/runtime/supervisor-options.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { rejection, testPlan } from "../runtime/helpers/harness.ts";

// A model of several whose llama-server fails as it loads (docs/supervisor.md, "Start failures"):
// the scheduler makes a new runtime for each load after a failed one (model-load.ts `startLoad`),
// so the hold on the same launch must outlive the runtime, or each chat pays the whole load again.

const never = () => new AbortController().signal;

describe.skipIf(process.platform === "win32")("a model of several that fails as it loads", () => {
  test("its next load, on a new runtime, answers the held error without launching", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const binary = writeFakeLlamaServer(dir.path, {
      FAKE_LLAMA_LOAD_MS: "20",
      FAKE_LLAMA_FAIL_START: "E something odd happened",
      FAKE_LLAMA_FAIL_EXIT: "3",
      FAKE_LLAMA_ARGV_LOG: argvLog,
    });
    const model = writeFakeModel(dir.path);
    const config = ConfigSchema.parse({
      app: { data_dir: join(dir.path, "data") },
      llama: { binary, idle_sleep_s: 0 },
      model: { path: model },
      models: [{ name: "odd", path: model }],
    });
    let plans = 0;
    const plan = async () => {
      plans++;
      const devices = [{ id: "cpu", usage: { total: 1 }, budget_bytes: 100 }] as unknown as DevicePlan[];
      return { plan: { devices }, launch: testPlan(model, { slot_save_path: null }) };
    };
    const startFailures = new Map<string, StartFailure>();
    const runtime = () =>
      makeModelRuntime("odd", {
        config: () => config,
        heldByOthers: () => [],
        reuse: () => ({}) as PromptReuse,
        startFailures,
        plan,
      });
    const first = runtime();
    const failed = await rejection(first.acquire(never()));
    await first.stop();
    // Each launch writes its arguments here: none may after this.
    rmSync(argvLog);
    const second = runtime();
    try {
      const held = await rejection(second.acquire(never()));
      expect(held.message).toContain(failed.message);
      expect(held.message).toMatch(/a warmup tries again at once/);
      // Planned again (another plan would launch), but not launched: one launch in all.
      expect(plans).toBe(2);
      expect(existsSync(argvLog)).toBe(false);
    } finally {
      await second.stop();
    }
  });
});
