import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { readGgufHeader } from "../../src/plan/gguf-read.ts";
import type { HardwareSnapshot } from "../../src/plan/hardware.ts";
import { type ModelInfo, modelInfo } from "../../src/plan/model.ts";
import { makePlan } from "../../src/plan/planner.ts";
import { renderPlan } from "../../src/plan/render.ts";
import { summariseModel } from "../../src/plan/report.ts";
import { PlanSchema } from "../../src/protocol/plan.ts";
import type { WorkerReport } from "../../src/rpc/client.ts";
import { coreErrorOf } from "../fixtures/core-error.ts";
import { llama8b, writeGguf } from "../fixtures/gguf-writer.ts";
import { cpuOnlyMachine, GIB } from "../fixtures/hardware.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The plan with llama.cpp RPC workers (docs/distributed.md): workers' devices in front of local
// GPUs, as llama-server orders them; --rpc with the workers that answered only; --tensor-split with
// a share per device; the others listed with why; a model that needs a missing worker says so.

let cached: ModelInfo | undefined;
async function l8(): Promise<ModelInfo> {
  if (!cached) {
    using dir = tmpdir();
    cached = modelInfo(await readGgufHeader(writeGguf(dir.path, "l8.gguf", llama8b())));
  }
  return cached;
}

/** A machine whose RAM cannot hold an 8B Q4 (about 4.6 GiB) with room to spare. */
const SMALL: HardwareSnapshot = cpuOnlyMachine({ ram: { total_bytes: 4 * GIB, available_bytes: 3 * GIB } });

const config = (rpc: unknown[], extra: Record<string, unknown> = {}) =>
  ConfigSchema.parse({ llama: { rpc }, ...extra });

const up = (endpoint: string, free = 24 * GIB, major = 5, devices = 1): WorkerReport => ({
  endpoint,
  ok: true,
  version: { major, minor: 1, patch: 0 },
  devices: Array.from({ length: devices }, () => ({ free_bytes: free, total_bytes: free })),
  ms: 1,
});
const down = (endpoint: string): WorkerReport => ({
  endpoint,
  ok: false,
  failure: "refused",
  message: "connection refused (no ggml-rpc-server listening on that port)",
  ms: 1,
});

const flagValue = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];

describe("plan with RPC workers", () => {
  test("two workers hold a model this machine cannot: --rpc both, all layers offloaded, one share per device", async () => {
    const m = await l8();
    const p = makePlan(m, SMALL, config(["10.0.0.2:50052", "10.0.0.3:50052"]), [
      up("10.0.0.2:50052"),
      up("10.0.0.3:50052"),
    ]);
    expect(PlanSchema.parse(p)).toEqual(p);
    expect(flagValue(p.argv, "--rpc")).toBe("10.0.0.2:50052,10.0.0.3:50052");
    expect(p.gpu_layers_all).toBe(true);
    const split = flagValue(p.argv, "--tensor-split")!.split(",").map(Number);
    expect(split).toHaveLength(2);
    expect(split.reduce((a, b) => a + b, 0)).toBe(m.n_layer + 1);
    expect(p.devices.map((d) => [d.id, d.kind, d.endpoint])).toEqual([
      ["cpu", "cpu", undefined],
      ["rpc0", "rpc", "10.0.0.2:50052"],
      ["rpc1", "rpc", "10.0.0.3:50052"],
    ]);
    for (const d of p.devices) expect(d.usage.total).toBeLessThanOrEqual(d.budget_bytes);
    // The split shown is the split passed: layers per device, the head on the last one.
    expect(p.devices[1]!.usage.layers).toBe(split[0]!);
    expect(p.devices[2]!.usage.layers + 1).toBe(split[1]!);
    expect(p.workers.map((w) => [w.endpoint, w.status, w.devices])).toEqual([
      ["10.0.0.2:50052", "used", ["rpc0"]],
      ["10.0.0.3:50052", "used", ["rpc1"]],
    ]);
    const names = p.decisions.map((d) => d.name);
    expect(names.indexOf("rpc")).toBe(names.indexOf("gpu_layers") + 1);
    expect(names.indexOf("tensor_split")).toBe(names.indexOf("rpc") + 1);
    expect(p.decisions.find((d) => d.name === "gpu_layers")!.reason).toContain("RPC workers");
    const reason = p.decisions.find((d) => d.name === "tensor_split")!.reason;
    expect(reason).toContain("rpc0 (10.0.0.2:50052)");
    expect(reason).toContain("rpc1 (10.0.0.3:50052)");
    expect(reason).toContain("output head");
  });

  test("an unreachable worker is left out with its reason; --rpc has the others only", async () => {
    const m = await l8();
    const p = makePlan(m, SMALL, config(["10.0.0.2:50052", "10.0.0.9:50052"]), [
      up("10.0.0.2:50052"),
      down("10.0.0.9:50052"),
    ]);
    expect(flagValue(p.argv, "--rpc")).toBe("10.0.0.2:50052");
    expect(p.workers[1]).toEqual({
      endpoint: "10.0.0.9:50052",
      status: "left_out",
      reason: "connection refused (no ggml-rpc-server listening on that port)",
      left_out: "refused",
      version: null,
      devices: [],
      memory_bytes: null,
    });
    expect(p.warnings.join("\n")).toContain("RPC worker 10.0.0.9:50052 left out: connection refused");
    expect(p.decisions.find((d) => d.name === "rpc")!.reason).toContain("left out: 10.0.0.9:50052");
    expect(p.devices.map((d) => d.id)).toEqual(["cpu", "rpc0"]);
  });

  test("a model that fits only with the missing worker is model_plan_error naming it", async () => {
    const m = await l8();
    const err = coreErrorOf(() => makePlan(m, SMALL, config(["10.0.0.9:50052"]), [down("10.0.0.9:50052")]));
    expect(err.code).toBe("model_plan_error");
    expect(err.message).toContain("10.0.0.9:50052 (connection refused");
    expect(err.data!.rpc_workers_left_out).toEqual([
      {
        endpoint: "10.0.0.9:50052",
        reason: "connection refused (no ggml-rpc-server listening on that port)",
      },
    ]);
  });

  test("no worker answers and the model fits here: planned on this machine, --rpc left out, saying why", async () => {
    const m = await l8();
    const p = makePlan(m, cpuOnlyMachine(), config(["10.0.0.9:50052"]), [down("10.0.0.9:50052")]);
    expect(p.argv).not.toContain("--rpc");
    expect(p.argv).not.toContain("--tensor-split");
    const rpc = p.decisions.find((d) => d.name === "rpc")!;
    expect(rpc).toMatchObject({ flags: [], value: null });
    expect(rpc.reason).toContain("no RPC worker can be used");
  });

  test("no llama.rpc: the plan is as before (no rpc decisions, no workers)", async () => {
    const m = await l8();
    const p = makePlan(m, cpuOnlyMachine(), ConfigSchema.parse({}));
    expect(p.workers).toEqual([]);
    expect(p.decisions.map((d) => d.name)).not.toContain("rpc");
    expect(p.decisions.map((d) => d.name)).not.toContain("tensor_split");
  });

  test("workers the plan was not given answers for are left out as unchecked", async () => {
    const m = await l8();
    const p = makePlan(m, cpuOnlyMachine(), config(["10.0.0.2:50052"]));
    expect(p.workers[0]).toMatchObject({ status: "left_out", left_out: "unchecked" });
  });

  test("a worker speaking another major version than the others is left out as wrong_version", async () => {
    const m = await l8();
    const p = makePlan(m, SMALL, config(["a:1", "b:1", "c:1"]), [
      up("a:1"),
      up("b:1", 24 * GIB, 7),
      up("c:1"),
    ]);
    expect(flagValue(p.argv, "--rpc")).toBe("a:1,c:1");
    expect(p.workers[1]).toMatchObject({ status: "left_out", left_out: "wrong_version", version: "7.1.0" });
    expect(p.workers[1]!.reason).toContain("speaks RPC protocol v7.1.0 while a:1 speaks v5.1.0");
  });

  test("memory_bytes replaces what the worker reports, with no margin", async () => {
    const m = await l8();
    const p = makePlan(m, SMALL, config([{ endpoint: "a:1", memory_bytes: 6 * GIB }]), [
      up("a:1", 100 * GIB),
    ]);
    const d = p.devices.find((x) => x.id === "rpc0")!;
    expect(d).toMatchObject({ budget_bytes: 6 * GIB, margin_bytes: 0, available_bytes: 6 * GIB });
    expect(p.workers[0]!.reason).toContain("budget 6.0 GiB from llama.rpc");
  });

  test("a worker with no memory beyond the margin is left out as no_memory", async () => {
    const m = await l8();
    const p = makePlan(m, cpuOnlyMachine(), config(["a:1"]), [up("a:1", 300 * 1024 * 1024)]);
    expect(p.workers[0]).toMatchObject({ status: "left_out", left_out: "no_memory" });
    expect(p.argv).not.toContain("--rpc");
  });

  test("a worker with two devices gives rpc0 and rpc1; the next worker's is rpc2; local GPUs come after", async () => {
    const m = await l8();
    const machine = cpuOnlyMachine({
      ram: { total_bytes: 4 * GIB, available_bytes: 3 * GIB },
      gpus: [
        {
          index: 0,
          vendor: "nvidia",
          name: "Small GPU",
          backend: "cuda",
          total_bytes: 2 * GIB,
          free_bytes: 2 * GIB,
          unified: false,
          driver: null,
          compute_capability: null,
        },
      ],
    });
    const p = makePlan(m, machine, config(["a:1", "b:1"]), [up("a:1", 2 * GIB, 5, 2), up("b:1", 4 * GIB)]);
    expect(p.devices.map((d) => d.id)).toEqual(["cpu", "rpc0", "rpc1", "rpc2", "gpu0"]);
    expect(p.workers.map((w) => w.devices)).toEqual([["rpc0", "rpc1"], ["rpc2"]]);
    const split = flagValue(p.argv, "--tensor-split")!.split(",");
    expect(split).toHaveLength(4);
    expect(p.decisions.find((d) => d.name === "gpu_layers")!.reason).toContain("the RPC workers and the GPU");
    expect(p.decisions.find((d) => d.name === "tensor_split")!.reason).toMatch(
      /rpc0 .*rpc1 .*rpc2 .*gpu0 \(Small GPU\)/,
    );
  });

  test("explicit gpu_layers: 0 keeps every layer here; no --tensor-split of zeros", async () => {
    const m = await l8();
    const p = makePlan(m, cpuOnlyMachine(), config(["a:1"], { model: { gpu_layers: 0 } }), [up("a:1")]);
    expect(p.gpu_layers).toBe(0);
    expect(p.argv).not.toContain("--tensor-split");
  });

  test("the pretty plan draws a bar per device, remote ones marked, and lists the workers left out", async () => {
    const m = await l8();
    const p = makePlan(m, SMALL, config(["10.0.0.2:50052", "10.0.0.9:50052"]), [
      up("10.0.0.2:50052"),
      down("10.0.0.9:50052"),
    ]);
    const text = renderPlan({ fits: true, model: summariseModel(m), hardware: SMALL, plan: p }, false);
    const bars = text.split("\n").filter((l) => /^ {2}\S+ +\[/.test(l));
    expect(bars.map((l) => l.trim().split(" ")[0])).toEqual(["cpu", "rpc0"]);
    expect(bars[1]).toContain("(remote: 10.0.0.2:50052)");
    expect(bars[0]).not.toContain("remote");
    expect(text).toContain("RPC workers left out\n  ✗ 10.0.0.9:50052: connection refused");
    expect(text).toContain("--rpc 10.0.0.2:50052 --tensor-split");
    expect(p.decisions.find((d) => d.name === "context")!.reason).not.toContain("on the GPU");
  });
});
