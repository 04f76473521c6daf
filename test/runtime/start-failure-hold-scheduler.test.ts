import { describe, expect, test } from "bun:test";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { Supervisor } from "../../src/runtime/supervisor.ts";
import type { StartFailure } from "../../src/runtime/supervisor-options.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, rejection, SETTINGS, schedulerOver, testPlan } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

/**
 * Several models (docs/supervisor.md, "Start failures"): a warmup that joins the load of a chat
 * whose start is under way (its supervisor planning) is the host asking, as with one model.
 */
describe.skipIf(process.platform === "win32")("a held start failure, several models", () => {
  test("a warmup that joins a chat's load while its start plans launches, not the held error", async () => {
    await using dir = tmpdir();
    const env = { FAKE_LLAMA_FAIL_START: "E something odd happened", FAKE_LLAMA_FAIL_EXIT: "3" };
    // Written once: the binary's file identity is part of the hold's key.
    const h = makeSupervisor(dir.path, { env });
    await h.supervisor.stop();
    let failure: StartFailure | undefined;
    let spawns = 0;
    let gate: Promise<void> | undefined;
    let planning = Promise.withResolvers<void>();
    // A new runtime for each load after a failed one, sharing the model's held failure.
    const scheduler = schedulerOver(
      () =>
        new Supervisor({
          findBinary: () => ({ path: h.binary }),
          plan: async () => {
            planning.resolve();
            await gate;
            return testPlan(h.model);
          },
          dataDir: () => h.dataDir,
          settings: () => SETTINGS,
          env: { ...process.env, FAKE_LLAMA_LOAD_MS: "20", ...env },
          reap: false,
          startFailure: { get: () => failure, set: (f) => (failure = f) },
          spawner: (req) => {
            spawns++;
            return bunSpawner(req);
          },
        }),
    );
    try {
      await rejection(scheduler.acquire("a", never()));
      expect(spawns).toBe(1);
      // The next chat's load reaches its supervisor's start, which plans while the warmup arrives.
      const open = Promise.withResolvers<void>();
      gate = open.promise;
      planning = Promise.withResolvers<void>();
      const chat = rejection(scheduler.acquire("a", never()));
      await planning.promise;
      const warmup = rejection(scheduler.acquire("a", never(), undefined, { explicit: true }));
      open.resolve();
      const [, tried] = await Promise.all([chat, warmup]);
      expect(tried.message).not.toMatch(/a warmup tries again at once/);
      expect(spawns).toBe(2);
    } finally {
      await scheduler.stop();
    }
  });
});
