import { describe, expect, test } from "bun:test";
import { renameSync } from "node:fs";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { SeveralModels } from "../../src/server/several-models.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { rejection, testPlan } from "../runtime/helpers/harness.ts";
import { oddModelStack } from "./odd-model-stack.ts";

// A model of several whose file is renamed away after its plan was made, before llama-server
// opens it (a pull replacing it, a user tidying a folder): the load says model_missing, leaves no
// server behind, and once the file is back the next load starts it, not held by the failure.

const never = () => new AbortController().signal;

describe.skipIf(process.platform === "win32")("a model file gone between the plan and the spawn", () => {
  test("model_missing, nothing running; the file back, the next load serves", async () => {
    await using dir = tmpdir();
    const { model, config } = oddModelStack(dir.path, {});
    // The plan (its header read before) is made; the file goes only after, while `vanish` says so.
    let vanish = true;
    const plan = async () => {
      const devices = [{ id: "cpu", usage: { total: 1 }, budget_bytes: 100 }] as unknown as DevicePlan[];
      const launch = testPlan(model, { slot_save_path: null });
      if (vanish) renameSync(model, `${model}.away`);
      return { plan: { devices }, launch };
    };
    const reuse = { saveBeforeUnload: async () => {}, stop: async () => {} } as unknown as PromptReuse;
    const several = new SeveralModels({
      config: () => config,
      reuse: () => reuse,
      pinnedProblem: async () => null,
      plan,
    });
    const odd = several.provider({ kind: "path", name: "odd" });
    const row = () => several.status().models.find((m) => m.name === "odd");
    try {
      const err = await rejection(odd.acquire(never()));
      expect(err.code).toBe("model_missing");
      expect(row()).toMatchObject({ state: "failed", pid: null });
      // Back where it was (same inode, size and time): another launch than the one that failed.
      vanish = false;
      renameSync(`${model}.away`, model);
      const lease = await odd.acquire(never());
      lease.release();
      expect(row()).toMatchObject({ state: "ready", start_held_until: null });
    } finally {
      await several.stop();
    }
  });
});
