import { afterEach, expect, test } from "bun:test";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { planLaunch } from "../../src/plan/launch.ts";
import { rpcWorkerSnapshot } from "../../src/rpc/workers.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { Supervisor } from "../../src/runtime/supervisor.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { fakeLlamaKnobs, writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { RpcWorkerStandIn } from "../fixtures/rpc-worker.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { SETTINGS } from "./helpers/harness.ts";

// A llama-server whose exit is seen only after its stop gave up waiting (a SIGKILLed process still
// freeing a large model's memory can take longer than the stop's wait), while the next start
// already runs on the same RPC workers: that late exit is the old server's, and must not mark the
// new server's workers free (status said "ok" for workers in use, and a doctor or plan then asked
// them, busy, and recorded them as timed out).

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

test("a stopped server's exit seen after the next start leaves that start's workers in use", async () => {
  using dir = tmpdir();
  const worker = await new RpcWorkerStandIn().start();
  cleanup.push(() => worker.kill());
  const binary = writeFakeLlamaServer(dir.path, fakeLlamaKnobs({ FAKE_LLAMA_LOAD_MS: "20" }));
  const config = ConfigSchema.parse({
    // The plan makes its slot folder under data_dir: the default, ./data, is the repository's.
    app: { data_dir: join(dir.path, "data") },
    model: { path: writeFakeModel(dir.path), context: 4096 },
    hardware: { ram_bytes: 2_000_000 },
    llama: { rpc: [worker.endpoint], kv_disk_bytes: 0 },
  });
  const deps = { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() };
  // The first child's exit is told only when the test lets it through.
  const late = Promise.withResolvers<void>();
  let spawned = 0;
  const supervisor = new Supervisor({
    findBinary: () => ({ path: binary }),
    plan: () => planLaunch(config, deps),
    dataDir: () => join(dir.path, "data"),
    settings: () => ({ ...SETTINGS, stopGraceMs: 0, restartBackoffMs: 1 }),
    reap: false,
    spawner: (req) => {
      const child = bunSpawner(req);
      if (++spawned > 1) return child;
      const exited = child.exited.then(async (e) => {
        await late.promise;
        return e;
      });
      // Its stop gives up waiting for that exit after 50 ms, not the 5 s a real stop waits.
      return { ...child, exited, killWaitMs: 50 };
    },
  });
  cleanup.push(() => supervisor.stop());

  const first = await supervisor.acquire(new AbortController().signal);
  // Failed (a wedge): stopped, and its stop gives up waiting for the exit it never hears.
  first.reportFailure("no progress");
  first.release();
  const second = await supervisor.acquire(new AbortController().signal);
  expect(spawned).toBe(2);
  expect(rpcWorkerSnapshot([worker.endpoint]).map((w) => w.state)).toEqual(["in_use"]);

  late.resolve();
  // The exit's handlers are promise callbacks: all of them have run by the next timer.
  await Bun.sleep(0);
  expect(rpcWorkerSnapshot([worker.endpoint]).map((w) => w.state)).toEqual(["in_use"]);
  second.release();
}, 30_000);
