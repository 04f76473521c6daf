import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { probeAhead } from "../../src/models/local-plan-deps.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { createSupervisor } from "../../src/runtime/provider.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { testPlan, waitFor } from "../runtime/helpers/harness.ts";

// A model unloaded while a probe runs (a host's `models` listing beside a model switch), or its
// llama-server crashed: that probe read the model's memory as used, so the next plan must not join
// it (plan/probe-ahead.ts). The supervisors the core makes tell it (runtime/provider.ts).

/** Counts the shared probe's `changed` while `body` runs. */
async function counted(body: (told: () => number) => Promise<void>): Promise<void> {
  const changed = probeAhead.changed;
  let told = 0;
  probeAhead.changed = () => {
    told++;
  };
  try {
    await body(() => told);
  } finally {
    probeAhead.changed = changed;
  }
}

/** A config over the stand-in in `dir`; `models`: the several-models list. */
function standIn(dir: string, models: boolean) {
  const model = writeFakeModel(dir);
  const config = ConfigSchema.parse({
    app: { data_dir: join(dir, "data") },
    llama: { binary: writeFakeLlamaServer(dir, { FAKE_LLAMA_LOAD_MS: "1" }), idle_sleep_s: 0 },
    model: { path: model },
    ...(models ? { models: [{ name: "a", path: model }] } : {}),
  });
  return { model, config };
}

describe.skipIf(process.platform === "win32")("a model's llama-server stopped", () => {
  test("tells the shared probe that the memory moved, once the server is gone", async () => {
    await using dir = tmpdir();
    const { model, config } = standIn(dir.path, true);
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
    await counted(async (told) => {
      (await runtime.acquire(new AbortController().signal)).release();
      expect(told()).toBe(0);
      await runtime.stop({ untilReleased: true });
      expect(told()).toBe(1);
    });
  });

  test("the one model's llama-server crashed: the shared probe is told before the restart plans", async () => {
    await using dir = tmpdir();
    const { model, config } = standIn(dir.path, false);
    const supervisor = createSupervisor(() => config, {
      plan: async () => testPlan(model, { slot_save_path: null }),
    });
    await counted(async (told) => {
      const lease = await supervisor.acquire(new AbortController().signal);
      expect(told()).toBe(0);
      process.kill(supervisor.pid() as number, "SIGKILL");
      expect(await waitFor(() => lease.died.aborted)).toBe(true);
      expect(told()).toBe(1);
      lease.release();
      await supervisor.stop();
    });
  });
});
