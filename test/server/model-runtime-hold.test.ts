import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { PromptReuse } from "../../src/agent/kv/reuse.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import type { DevicePlan } from "../../src/protocol/plan.ts";
import { START_FAILURE_HOLD_MS } from "../../src/runtime/launcher.ts";
import { Scheduler } from "../../src/runtime/scheduler.ts";
import { type StartFailure, startHeldUntil } from "../../src/runtime/supervisor-options.ts";
import { makeModelRuntime } from "../../src/server/model-runtime.ts";
import { statusOf } from "../../src/server/several-models-status.ts";
import { writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { rejection, testPlan } from "../runtime/helpers/harness.ts";
import { oddModelStack } from "./odd-model-stack.ts";

// A model of several whose llama-server fails as it loads (docs/supervisor.md, "Start failures"):
// the scheduler makes a new runtime for each load after a failed one (model-load.ts `startLoad`),
// so the hold on the same launch must outlive the runtime, or each chat pays the whole load again.

const never = () => new AbortController().signal;

describe.skipIf(process.platform === "win32")("a model of several that fails as it loads", () => {
  test("its next load, on a new runtime, answers the held error without launching", async () => {
    await using dir = tmpdir();
    const argvLog = join(dir.path, "argv.txt");
    const { model, config } = oddModelStack(dir.path, {
      FAKE_LLAMA_FAIL_START: "E something odd happened",
      FAKE_LLAMA_FAIL_EXIT: "3",
      FAKE_LLAMA_ARGV_LOG: argvLog,
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

  test("a held start makes no room: an idle model is not unloaded for a start refused at once", async () => {
    await using dir = tmpdir();
    const model = writeFakeModel(dir.path);
    // "a" serves; "b" fails as it loads. Each needs 6 of the 10 bytes: b's load unloads a.
    const binaryOf = (name: string, knobs: Record<string, string>) => {
      const sub = join(dir.path, name);
      mkdirSync(sub);
      return writeFakeLlamaServer(sub, { FAKE_LLAMA_LOAD_MS: "20", ...knobs });
    };
    const binaries: Record<string, string> = {
      a: binaryOf("a", {}),
      b: binaryOf("b", { FAKE_LLAMA_FAIL_START: "E something odd happened", FAKE_LLAMA_FAIL_EXIT: "3" }),
    };
    const configOf = (name: string) =>
      ConfigSchema.parse({
        app: { data_dir: join(dir.path, "data") },
        llama: { binary: binaries[name], idle_sleep_s: 0 },
        model: { path: model },
        models: [
          { name: "a", path: model },
          { name: "b", path: model },
        ],
      });
    const plan = async () => {
      const devices = [{ id: "cpu", usage: { total: 6 }, budget_bytes: 10 }] as unknown as DevicePlan[];
      return { plan: { devices }, launch: testPlan(model, { slot_save_path: null }) };
    };
    const startFailures = new Map<string, StartFailure>();
    const heldUntil = (m: string) => startHeldUntil(startFailures.get(m), START_FAILURE_HOLD_MS, Date.now());
    const scheduler: Scheduler = new Scheduler({
      runtime: (name) =>
        makeModelRuntime(name, {
          config: () => configOf(name),
          heldByOthers: (m) => scheduler.heldByOthers(m),
          reuse: () => ({ saveBeforeUnload: async () => {} }) as unknown as PromptReuse,
          startFailures,
          plan,
        }),
      settings: () => ({ loadWaitMs: 5_000, idleUnloadMs: 0 }),
      configured: () => [
        { name: "a", pinned: false },
        { name: "b", pinned: false },
      ],
      cancelChats: () => {},
    });
    const state = (name: string) => scheduler.snapshot().models.find((m) => m.name === name)?.state;
    try {
      (await scheduler.acquire("a", never())).release();
      // The first start of b is tried: a makes room for it, and b fails once spawned.
      const failed = await rejection(scheduler.acquire("b", never()));
      expect(state("a")).toBe("unloaded");
      (await scheduler.acquire("a", never())).release();
      // Within the hold, b's next start is refused at once: a must still serve.
      const held = await rejection(scheduler.acquire("b", never()));
      expect(held.message).toContain(failed.message);
      expect(held.message).toMatch(/a warmup tries again at once/);
      expect(state("a")).toBe("loaded");
      // Status says until when, as the error's data does (docs/protocol.md#status).
      const row = statusOf(
        scheduler,
        [],
        () => 0,
        (m) => heldUntil(m),
      ).models.find((m) => m.name === "b");
      expect(row?.start_held_until).toBe(held.data?.next_try_at as string);
    } finally {
      await scheduler.stop();
    }
  });
});
