import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { watchedCompletion } from "../../src/agent/watched-completion.ts";
import type { Endpoint } from "../../src/config/rpc-endpoint.ts";
import { ConfigSchema } from "../../src/config/schema.ts";
import { STREAM_FIELDS } from "../../src/llama/completion.ts";
import { defaultPlanDeps } from "../../src/models/local-plan-deps.ts";
import { type LaunchPlan, planLaunch } from "../../src/plan/launch.ts";
import { parseListDevices } from "../../src/plan/listed-devices.ts";
import { probeHardware, runWithTimeout } from "../../src/plan/probe.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { acceptsConnections, queryWorker } from "../../src/rpc/client.ts";
import { rpcWorkerSnapshot } from "../../src/rpc/workers.ts";
import { knownChildMode } from "../../src/runtime/child-mode.ts";
import type { LlamaLease } from "../../src/runtime/endpoint.ts";
import { pickFreePort } from "../../src/runtime/ports.ts";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import { Supervisor } from "../../src/runtime/supervisor.ts";
import { realServerTestModel } from "../fixtures/llama-test-model.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { SETTINGS, testPlan } from "./helpers/harness.ts";

// Opt-in: the same supervisor against a real llama-server and a real GGUF.
const BINARY = process.env.LOCAL_AI_TEST_LLAMA_SERVER;
// LOCAL_AI_TEST_MODEL overrides the tiny model the fixture writes (test/fixtures/llama-test-model.ts).
const MODEL = BINARY ? realServerTestModel() : undefined;

if (!BINARY || !MODEL) {
  test.skip("real llama-server: set LOCAL_AI_TEST_LLAMA_SERVER to run (skipped)", () => {});
} else {
  describe("supervisor against a real llama-server", () => {
    test("starts, answers a chat with our key, refuses without it, stops", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => testPlan(MODEL),
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000 }),
        reap: false,
      });
      const lease = await supervisor.acquire(new AbortController().signal);
      const pid = supervisor.pid() as number;
      try {
        const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { Authorization: `Bearer ${lease.apiKey}`, "Content-Type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content: "Say hello." }], max_tokens: 4 }),
        });
        expect(res.status).toBe(200);
        expect((await fetch(`${lease.baseUrl}/v1/models`)).status).toBe(401);
      } finally {
        lease.release();
        await supervisor.stop();
      }
      expect(() => process.kill(pid, 0)).toThrow();
    }, 120_000);

    test("extra_args' --api-key and --hf-token reach it by its environment: both keys work, neither is on its command line (76b)", async () => {
      await using dir = tmpdir();
      const extra = ["--api-key", "user-key-76b", "--hf-token", "hf_NOT_ON_CMDLINE"];
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => testPlan(MODEL, { extra_args: extra }),
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000 }),
        reap: false,
      });
      const lease = await supervisor.acquire(new AbortController().signal);
      try {
        const cmdline = readFileSync(`/proc/${supervisor.pid()}/cmdline`, "utf8");
        expect(cmdline).not.toContain("user-key-76b");
        expect(cmdline).not.toContain("hf_NOT_ON_CMDLINE");
        for (const key of [lease.apiKey, "user-key-76b"]) {
          const res = await fetch(`${lease.baseUrl}/v1/models`, {
            headers: { Authorization: `Bearer ${key}` },
          });
          expect(res.status).toBe(200);
        }
        expect((await fetch(`${lease.baseUrl}/v1/models`)).status).toBe(401);
      } finally {
        lease.release();
        await supervisor.stop();
      }
    }, 120_000);

    // Every streamed request asks return_progress (docs/agent.md "Progress is an event"): this
    // build takes the field and sends a progress event as the slot starts and one a batch
    // (transcripts/98b), and the core's own request reads them as no piece of the reply.
    test("return_progress: the real server sends the prompt's progress events; the reply's deltas are the tokens alone", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => testPlan(MODEL, { extra_args: ["-b", "64", "-ub", "64"] }),
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000 }),
        reap: false,
      });
      const lease = await supervisor.acquire(new AbortController().signal);
      const words = "a slow machine reads a long prompt batch by batch".split(" ");
      const long = Array.from({ length: 300 }, (_, i) => words[i % words.length]).join(" ");
      const messages = [{ role: "user", content: long }];
      try {
        const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { Authorization: `Bearer ${lease.apiKey}`, "Content-Type": "application/json" },
          body: JSON.stringify({ messages, max_tokens: 4, ...STREAM_FIELDS }),
        });
        expect(res.status).toBe(200);
        const progress = (await res.text())
          .split("\n\n")
          .filter((e) => e.startsWith("data: {"))
          .map((e) => JSON.parse(e.slice("data: ".length)).prompt_progress)
          .filter(Boolean);
        // 0 as the slot starts, then one a batch of 64 (the prompt is read anew: no cache).
        expect(progress.length).toBeGreaterThanOrEqual(3);
        expect(progress.at(-1).processed).toBe(progress.at(-1).total);
        const deltas: string[] = [];
        const reply = await watchedCompletion(
          lease,
          { messages: [{ role: "user", content: `${long} again` }], max_tokens: 4 },
          { signal: new AbortController().signal, onDelta: (d) => deltas.push(d) },
        );
        expect(deltas.every((d) => d.length > 0)).toBe(true);
        expect(deltas.join("")).toBe(reply.content);
        expect(reply.ttftMs).toBeGreaterThan(0);
        expect(reply.timings?.predicted_n).toBeGreaterThan(0);
      } finally {
        lease.release();
        await supervisor.stop();
      }
    }, 120_000);

    test("llama.mmap false and llama.mlock true start in the flags this build takes", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        // `llama.mmap: false`, `llama.mlock: true`: rendered in the dialect of this build.
        plan: async () => testPlan(MODEL, { context_per_slot: 512, mmap: false, mlock: true }),
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000 }),
        reap: false,
      });
      try {
        const lease = await supervisor.acquire(new AbortController().signal);
        lease.release();
        const args = readFileSync(`/proc/${supervisor.pid()}/cmdline`, "utf8").split("\0");
        // Either the old pair (a build without --load-mode) or the one mode that means the same.
        const legacy = args.includes("--no-mmap") && args.includes("--mlock");
        const modern = args.join(" ").includes("--load-mode mlock") && !args.includes("--no-mmap");
        expect(legacy || modern).toBe(true);
      } finally {
        await supervisor.stop();
      }
    }, 120_000);

    test("child mode (transcripts/90): started as a child, loading fraction from its state lines, stopped by the exit line", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        // Read, not mapped, so the state lines carry values between 0 and 1.
        plan: async () => testPlan(MODEL, { context_per_slot: 512, mmap: false }),
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000 }),
        reap: false,
      });
      const heard: StartProgress[] = [];
      const lease = await supervisor.acquire(new AbortController().signal, (p) => heard.push(p));
      lease.release();
      const pid = supervisor.pid() as number;
      expect(await knownChildMode(BINARY)).toBe(true);
      expect(readFileSync(`/proc/${pid}/environ`, "utf8").split("\0")).toContain(
        "LLAMA_SERVER_ROUTER_PORT=1",
      );
      for (const p of heard)
        if (p.phase === "loading" && p.fraction !== undefined) expect(p.fraction).toBeWithin(0, 1.0001);
      const t0 = Date.now();
      await supervisor.stop();
      expect(Date.now() - t0).toBeLessThan(1500);
      expect(() => process.kill(pid, 0)).toThrow();
      const log = readFileSync(join(dir.path, "data", "logs", "llama-server.log"), "utf8");
      expect(log).toContain("exit command received");
    }, 120_000);

    // docs/plan.md "Which GPUs": the listing as this build prints it, whatever its backends.
    test("--list-devices: the build's own listing reads as a device list, and the probe plans its devices", async () => {
      const r = await runWithTimeout(BINARY, ["--list-devices"], 30_000);
      expect(r.kind).toBe("exit");
      if (r.kind !== "exit") return;
      expect(r.code).toBe(0);
      const listed = parseListDevices(r.stdout);
      expect(listed).not.toBeNull();
      const lines = r.stdout.split("\n").filter((l) => /^\s+\S+: .* MiB free\)$/.test(l));
      expect(listed!.map((d) => d.name)).toEqual(lines.map((l) => l.trim().split(":")[0]!));
      const hw = await probeHardware(undefined, BINARY);
      expect(hw.probes.find((p) => p.id === "llama-server")?.status).toBe("ok");
      for (const g of hw.gpus) expect(listed!.map((d) => d.name)).toContain(g.device!);
    }, 60_000);

    test("a missing model → model_missing", async () => {
      await using dir = tmpdir();
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => testPlan(join(dir.path, "nope.gguf"), { context_per_slot: 512 }),
        dataDir: () => join(dir.path, "data"),
        settings: () => SETTINGS,
        reap: false,
      });
      await expect(supervisor.acquire(new AbortController().signal)).rejects.toMatchObject({
        code: "model_missing",
      });
    }, 60_000);
  });
}

// Opt-in: RPC workers for real (docs/distributed.md). LOCAL_AI_TEST_RPC_SERVER is a ggml-rpc-server
// binary; the test starts two on 127.0.0.1, plans and serves across both, kills one mid-run, and
// expects the named error and a restart planned without it.
const RPC_SERVER = process.env.LOCAL_AI_TEST_RPC_SERVER;

if (!BINARY || !MODEL || !RPC_SERVER) {
  test.skip("real RPC workers: set LOCAL_AI_TEST_RPC_SERVER too to run (skipped)", () => {});
} else {
  describe("supervisor and plan against real ggml-rpc-server workers", () => {
    test("two workers: plan and serve on both; one killed mid-run is named, the restart does without it", async () => {
      await using dir = tmpdir();
      const workers = await Promise.all([startRpcServer(RPC_SERVER), startRpcServer(RPC_SERVER)]);
      const [a, b] = workers as [RealWorker, RealWorker];
      const config = ConfigSchema.parse({
        // Each start makes the plan's slot folder under data_dir: the default, ./data, is the repository's.
        app: { data_dir: join(dir.path, "data") },
        model: { path: MODEL, context: 1024 },
        llama: { binary: BINARY, rpc: [a.endpoint, b.endpoint] },
      });
      const plans: LaunchPlan[] = [];
      const supervisor = new Supervisor({
        findBinary: () => ({ path: BINARY }),
        plan: async () => {
          const p = await planLaunch(config, defaultPlanDeps);
          plans.push(p);
          return p;
        },
        dataDir: () => join(dir.path, "data"),
        settings: () => ({ ...SETTINGS, startupTimeoutMs: 60_000, stopGraceMs: 3000, restartBackoffMs: 10 }),
        reap: false,
      });
      const chat = (lease: LlamaLease) =>
        fetch(`${lease.baseUrl}/v1/chat/completions`, {
          method: "POST",
          headers: { Authorization: `Bearer ${lease.apiKey}`, "Content-Type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
          signal: lease.died,
        });
      try {
        // The query client against the real thing: a version, one device with memory.
        const report = await queryWorker(a);
        expect(report).toMatchObject({ ok: true, devices: [{ total_bytes: expect.any(Number) }] });

        const lease = await supervisor.acquire(new AbortController().signal);
        expect(plans[0]!.rpc_workers).toEqual([a.endpoint, b.endpoint]);
        expect(plans[0]!.tensor_split).not.toBeNull();
        expect(rpcWorkerSnapshot([a.endpoint, b.endpoint]).map((w) => w.state)).toEqual(["in_use", "in_use"]);
        expect((await chat(lease)).status).toBe(200);

        b.proc.kill("SIGKILL");
        await b.proc.exited;
        // The turn's own request path: the abort closes the sockets a few ms before its exit is
        // seen (GGML_NO_BACKTRACE, runtime/child-env.ts), and the chat still gets the named error,
        // not a bare dropped connection (runtime/death-reason.ts DEATH_GRACE_MS).
        const failed = await watchedCompletion(
          lease,
          { messages: [{ role: "user", content: "hi" }], max_tokens: 4 },
          { signal: new AbortController().signal, onDelta: () => {} },
        ).then(
          () => "answered",
          (e: unknown) => e,
        );
        lease.release();
        expect(failed).toBeInstanceOf(CoreError);
        expect((failed as CoreError).message).toContain(`RPC worker ${b.endpoint} stopped answering`);
        expect(await waitFor(() => supervisor.currentState() === "stopped", { timeoutMs: 30_000 })).toBe(
          true,
        );
        expect(supervisor.snapshot().lastError?.message ?? "").toContain(b.endpoint);
        expect(rpcWorkerSnapshot([b.endpoint])[0]!.state).toBe("lost");

        const again = await supervisor.acquire(new AbortController().signal);
        expect(plans[1]!.rpc_workers).toEqual([a.endpoint]);
        expect((await chat(again)).status).toBe(200);
        again.release();
      } finally {
        await supervisor.stop();
        for (const w of workers) w.proc.kill("SIGKILL");
      }
    }, 240_000);
  });
}

interface RealWorker extends Endpoint {
  proc: ReturnType<typeof Bun.spawn>;
}

/** A ggml-rpc-server on 127.0.0.1 and a free port, once it accepts connections. */
async function startRpcServer(binary: string): Promise<RealWorker> {
  const port = await pickFreePort();
  const proc = Bun.spawn([binary, "-H", "127.0.0.1", "-p", String(port)], {
    stdout: "ignore",
    stderr: "ignore",
  });
  const target = { endpoint: `127.0.0.1:${port}`, host: "127.0.0.1", port };
  const deadline = Date.now() + 20_000;
  while (!(await acceptsConnections(target, 200))) {
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill("SIGKILL");
      throw new Error(`ggml-rpc-server did not start on ${target.endpoint}`);
    }
    await Bun.sleep(50);
  }
  return { ...target, proc };
}
