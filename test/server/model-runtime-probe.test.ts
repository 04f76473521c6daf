import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { probeAhead } from "../../src/models/local-plan-deps.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { testPlan } from "../runtime/helpers/harness.ts";

// A model unloaded while a probe runs (a host's `models` listing beside a model switch): that
// probe read the model's memory as used, so the next plan must not join it (plan/probe-ahead.ts).

describe.skipIf(process.platform === "win32")("a model's llama-server stopped", () => {
  test("tells the shared probe that the memory moved, once the server is gone", async () => {
    await using dir = tmpdir();
    const model = writeFakeModel(dir.path);
    const config = ConfigSchema.parse({
      app: { data_dir: join(dir.path, "data") },
      llama: { binary: writeFakeLlamaServer(dir.path, { FAKE_LLAMA_LOAD_MS: "1" }), idle_sleep_s: 0 },
      model: { path: model },
      models: [{ name: "a", path: model }],
    });
    const plan = async () => {
      const devices = [{ id: "cpu", usage: { total: 1 }, budget_bytes: 100 }] as unknown as DevicePlan[];
      return { plan: { devices }, launch: testPlan(model, { slot_save_path: null }) };
    };
    const runtime = makeModelRuntime("a", {
      config: () => config,
      heldByOthers: () => [],
      reuse: () => ({}) as PromptReuse,
      plan,
    });
    const changed = probeAhead.changed;
    let told = 0;
    probeAhead.changed = () => {
      told++;
    };
    try {
      (await runtime.acquire(new AbortController().signal)).release();
      expect(told).toBe(0);
      await runtime.stop();
      expect(told).toBe(1);
    } finally {
      probeAhead.changed = changed;
    }
  });
});
