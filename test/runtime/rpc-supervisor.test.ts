import { afterEach, describe, expect, test } from "bun:test";
import { once } from "node:events";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { watchedCompletion } from "../../src/agent/watched-completion.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { type LaunchPlan, planLaunch } from "../../src/plan/launch.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { rpcWorkerSnapshot } from "../../src/rpc/workers.ts";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { Supervisor } from "../../src/runtime/supervisor.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";
import { fakeLlamaKnobs, writeFakeLlamaServer, writeFakeModel } from "../fixtures/llama-stand-in/binary.ts";
import { RpcWorkerStandIn } from "../fixtures/rpc-worker.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { chatBody, SETTINGS } from "./helpers/harness.ts";

// The supervisor with RPC workers, against the llama-server stand-in taught --rpc and worker
// stand-ins (transcripts 80–84): the plan asks the workers before every start, a worker lost
// mid-run is named in the error the lease gets and left out of the next start, a worker that
// vanishes between the check and the start is caught, and status sees each worker's state.

const workers: RpcWorkerStandIn[] = [];
const supervisors: Supervisor[] = [];
afterEach(async () => {
  for (const s of supervisors.splice(0)) await s.stop();
  for (const w of workers.splice(0)) await w.kill();
});

async function worker(options: ConstructorParameters<typeof RpcWorkerStandIn>[0] = {}) {
  const w = await new RpcWorkerStandIn(options).start();
  workers.push(w);
  return w;
}

interface SetupOptions {
  knobs?: Record<string, string>;
  plan?: () => Promise<LaunchPlan>;
  /** Whether this machine could hold the model alone (else RAM is too small at 4096 tokens). */
  fitsAlone?: boolean;
  pickPort?: () => Promise<number>;
  /** Told of each llama-server spawned. */
  onSpawn?: () => void;
}

function setup(
  dir: string,
  rpc: unknown[],
  { knobs = {}, plan, fitsAlone = false, pickPort, onSpawn }: SetupOptions = {},
) {
  const binary = writeFakeLlamaServer(dir, fakeLlamaKnobs({ FAKE_LLAMA_LOAD_MS: "20", ...knobs }));
  const model = writeFakeModel(dir);
  const config = ConfigSchema.parse({
    // Each start makes the plan's slot folder under data_dir: the default, ./data, is the repository's.
    app: { data_dir: join(dir, "data") },
    model: { path: model, context: 4096 },
    hardware: { ram_bytes: fitsAlone ? 64_000_000 : 2_000_000 },
    llama: { rpc, kv_disk_bytes: 0 },
  });
  const deps = { ...defaultPlanDeps, probe: async () => cpuOnlyMachine() };
  const plans: LaunchPlan[] = [];
  const supervisor = new Supervisor({
    findBinary: () => ({ path: binary }),
    plan: async () => {
      const p = await (plan ?? (() => planLaunch(config, deps)))();
      plans.push(p);
      return p;
    },
    dataDir: () => join(dir, "data"),
    settings: () => ({ ...SETTINGS, restartBackoffMs: 10 }),
    reap: false,
    ...(pickPort ? { pickPort } : {}),
    spawner: (req) => {
      onSpawn?.();
      return bunSpawner(req);
    },
  });
  supervisors.push(supervisor);
  return { supervisor, plans, config, deps };
}

/** The start's error; the test fails if it started instead. */
async function startFails(s: Supervisor): Promise<CoreError> {
  const r = await s.acquire(new AbortController().signal).then(
    (lease) => {
      lease.release();
      return "started";
    },
    (e: unknown) => e,
  );
  if (!(r instanceof CoreError)) throw new Error(`expected the start to fail, got ${String(r)}`);
  return r;
}

const rpcOf = (p: LaunchPlan) => p.rpc_workers.join(",");

async function chat(lease: { baseUrl: string; apiKey: string; died: AbortSignal }) {
  return fetch(`${lease.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${lease.apiKey}`, "Content-Type": "application/json" },
    body: chatBody(false),
    signal: lease.died,
  });
}

/**
 * A turn's request (agent/watched-completion.ts) and how it ended: the stand-in exits 15 ms after
 * its abort line, as the real build does, so the socket's reset can come before the exit and
 * the finding of the lost worker; the error must still name it.
 */
function turnRequest(lease: LlamaLease): Promise<unknown> {
  const request = { messages: [{ role: "user", content: "hi" }], max_tokens: 4 };
  return watchedCompletion(lease, request, { signal: new AbortController().signal, onDelta: () => {} }).then(
    () => "answered",
    (e: unknown) => e,
  );
}

describe("supervisor with RPC workers", () => {
  test("starts with --rpc on the workers that answer; llama-server lists them as RPC devices; status says in use", async () => {
    using dir = tmpdir();
    const a = await worker();
    const b = await worker();
    const { supervisor, plans } = setup(dir.path, [a.endpoint, b.endpoint]);
    const lease = await supervisor.acquire(new AbortController().signal);
    expect(rpcOf(plans[0]!)).toBe(`${a.endpoint},${b.endpoint}`);
    expect(plans[0]!.rpc_workers).toEqual([a.endpoint, b.endpoint]);
    const tail = supervisor.tail.last(100).join("\n");
    expect(tail).toContain(`- RPC0    : ${a.endpoint} (24105 MiB, 24105 MiB free)`);
    expect(tail).toContain(`- RPC1    : ${b.endpoint} (24105 MiB, 24105 MiB free)`);
    expect(rpcWorkerSnapshot([a.endpoint, b.endpoint]).map((w) => w.state)).toEqual(["in_use", "in_use"]);
    expect((await chat(lease)).status).toBe(200);
    lease.release();
    await supervisor.stop();
    expect(rpcWorkerSnapshot([a.endpoint, b.endpoint]).map((w) => w.state)).toEqual(["ok", "ok"]);
  });

  test("a worker dies mid-run: the lease's error names it, and the restart plans without it", async () => {
    using dir = tmpdir();
    const a = await worker();
    const b = await worker();
    const { supervisor, plans } = setup(dir.path, [a.endpoint, b.endpoint]);
    const lease = await supervisor.acquire(new AbortController().signal);
    await b.kill();
    const failed = await turnRequest(lease);
    expect(failed).toBeInstanceOf(CoreError);
    expect((failed as CoreError).message).toContain(`RPC worker ${b.endpoint} stopped answering`);
    expect((failed as CoreError).data).toMatchObject({ rpc_workers_lost: [b.endpoint] });
    lease.release();
    expect(await waitFor(() => supervisor.currentState() === "stopped")).toBe(true);
    expect(rpcWorkerSnapshot([a.endpoint, b.endpoint]).map((w) => w.state)).toEqual(["ok", "lost"]);
    expect(supervisor.snapshot().lastError?.message ?? "").toContain(b.endpoint);

    const again = await supervisor.acquire(new AbortController().signal);
    expect(rpcOf(plans[1]!)).toBe(a.endpoint);
    expect((await chat(again)).status).toBe(200);
    again.release();
    expect(rpcWorkerSnapshot([a.endpoint, b.endpoint]).map((w) => w.state)).toEqual(["in_use", "refused"]);
  }, 20_000);

  test("without the lost worker the model no longer fits: the restart is model_plan_error naming it", async () => {
    using dir = tmpdir();
    const a = await worker();
    const { supervisor } = setup(dir.path, [a.endpoint]);
    const lease = await supervisor.acquire(new AbortController().signal);
    await a.kill();
    await chat(lease).catch(() => {});
    lease.release();
    const err = await startFails(supervisor);
    expect(err).toMatchObject({ code: "model_plan_error" });
    expect(err.message).toContain("does not fit");
    expect(err.message).toContain(`${a.endpoint} (connection refused`);
  }, 20_000);

  test("a worker that vanishes between the check and the start (skipped, as b10587 does) is a named start failure; the next start does without it", async () => {
    using dir = tmpdir();
    const a = await worker();
    const b = await worker();
    let first = true;
    const { supervisor, plans, config, deps } = setup(dir.path, [a.endpoint, b.endpoint], {
      plan: async () => {
        const p = await planLaunch(config, deps);
        if (first) await b.kill(); // after the check, before the spawn
        first = false;
        return p;
      },
    });
    const err = await startFails(supervisor);
    expect(rpcOf(plans[0]!)).toBe(`${a.endpoint},${b.endpoint}`);
    expect(err).toBeInstanceOf(CoreError);
    expect(err.message).toContain(
      `llama-server started without RPC worker ${b.endpoint} (it could not connect)`,
    );
    expect(supervisor.pid()).toBeUndefined();
    const lease = await supervisor.acquire(new AbortController().signal);
    expect(rpcOf(plans[1]!)).toBe(a.endpoint);
    lease.release();
  }, 20_000);

  test("a worker that crashes llama-server as it loads, still answering: the next chat gets the error without loading again", async () => {
    using dir = tmpdir();
    const a = await worker();
    let spawns = 0;
    const { supervisor, plans } = setup(dir.path, [a.endpoint], {
      // b10587 as a worker crashed it at load: SIGSEGV, no RPC line (docs/distributed.md).
      knobs: { FAKE_LLAMA_FAIL_START: "E llama_model_load: loading tensors", FAKE_LLAMA_FAIL_EXIT: "139" },
      onSpawn: () => spawns++,
    });
    const first = await startFails(supervisor);
    expect(first.data?.rpc_workers_lost).toBeUndefined();
    const second = await startFails(supervisor);
    expect(second.message).toContain(first.message);
    expect(plans.map(rpcOf)).toEqual([a.endpoint, a.endpoint]);
    expect(spawns).toBe(1);
  }, 20_000);

  test("a worker skipped by a spawn that could not bind its port is not held against the next spawn", async () => {
    // The launch picks another port and spawns again (launcher.ts) without a new begin(): the
    // first spawn's `Failed to connect` (printed before it binds) must not fail the second,
    // which reached every worker.
    using dir = tmpdir();
    const a = await worker();
    const b = await worker();
    const taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
    let picks = 0;
    const pickPort = async () => {
      picks++;
      if (picks === 1) {
        await b.kill(); // gone for the first spawn only
        return (taken.address() as AddressInfo).port;
      }
      await b.revive();
      return pickFreePort();
    };
    const { supervisor, plans } = setup(dir.path, [a.endpoint, b.endpoint], { pickPort });
    try {
      const lease = await supervisor.acquire(new AbortController().signal);
      expect(picks).toBe(2);
      expect(rpcOf(plans[0]!)).toBe(`${a.endpoint},${b.endpoint}`);
      expect(rpcWorkerSnapshot([a.endpoint, b.endpoint]).map((w) => w.state)).toEqual(["in_use", "in_use"]);
      lease.release();
    } finally {
      taken.close();
    }
  }, 20_000);

  test("the same with a llama-server that aborts on an unreachable worker (newer builds): named too", async () => {
    using dir = tmpdir();
    const a = await worker();
    const b = await worker();
    let first = true;
    const { supervisor, config, deps } = setup(dir.path, [a.endpoint, b.endpoint], {
      knobs: { FAKE_LLAMA_RPC_ABORT: "1" },
      plan: async () => {
        const p = await planLaunch(config, deps);
        if (first) await b.kill();
        first = false;
        return p;
      },
    });
    const err = await startFails(supervisor);
    expect(err.message).toContain(`could not connect to RPC worker ${b.endpoint} at start-up`);
    expect(err.data).toMatchObject({ signal: "SIGABRT" });
    (await supervisor.acquire(new AbortController().signal)).release();
  }, 20_000);

  test("workers of different majors: the plan leaves the odd one out before any start", async () => {
    using dir = tmpdir();
    const a = await worker();
    const b = await worker();
    const odd = await worker({ version: [7, 0, 0] });
    const { supervisor, plans } = setup(dir.path, [a.endpoint, odd.endpoint, b.endpoint]);
    (await supervisor.acquire(new AbortController().signal)).release();
    expect(rpcOf(plans[0]!)).toBe(`${a.endpoint},${b.endpoint}`);
  }, 20_000);

  test("a worker whose version llama-server refuses is named, then left out of the next plan", async () => {
    using dir = tmpdir();
    const old = await worker({ version: [4, 0, 0] });
    const { supervisor, plans } = setup(dir.path, [old.endpoint], { fitsAlone: true });
    // One worker: nothing to compare it with until llama-server itself refuses it.
    const err = await startFails(supervisor);
    expect(err).toBeInstanceOf(CoreError);
    expect(err.message).toContain(
      `${old.endpoint} (it speaks RPC protocol v4.0.0, which this llama-server refuses)`,
    );
    const lease = await supervisor.acquire(new AbortController().signal);
    expect(plans.at(-1)!.rpc_workers).toEqual([]);
    lease.release();
    expect(rpcWorkerSnapshot([old.endpoint])[0]).toMatchObject({ state: "wrong_version" });
  }, 20_000);

  test("with a llama-server that aborts on a refused version (newer builds), the worker is named", async () => {
    using dir = tmpdir();
    const old = await worker({ version: [4, 0, 0] });
    const { supervisor } = setup(dir.path, [old.endpoint], {
      fitsAlone: true,
      knobs: { FAKE_LLAMA_RPC_ABORT: "1" },
    });
    const err = await startFails(supervisor);
    expect(err.message).toContain(`RPC worker ${old.endpoint} speaks another RPC protocol version`);
    (await supervisor.acquire(new AbortController().signal)).release();
    expect(rpcWorkerSnapshot([old.endpoint])[0]).toMatchObject({ state: "wrong_version" });
  }, 20_000);

  test("a worker that dies while llama-server is idle: the next request still gets the named error", async () => {
    using dir = tmpdir();
    const a = await worker();
    const { supervisor } = setup(dir.path, [a.endpoint]);
    const lease = await supervisor.acquire(new AbortController().signal);
    await a.kill();
    await Bun.sleep(50);
    const failed = await turnRequest(lease);
    expect(failed).toBeInstanceOf(CoreError);
    expect((failed as CoreError).message).toContain(`RPC worker ${a.endpoint} stopped answering`);
    lease.release();
  }, 20_000);
});
