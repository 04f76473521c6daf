import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../../src/config/schema.ts";
import type { Budgets } from "../../../src/plan/decide/budgets.ts";
import { devicePlans } from "../../../src/plan/decide/devices.ts";
import {
  decideTensorSplit,
  explainingLeftOut,
  rpcDecision,
  rpcDevices,
  rpcLayersReason,
  withRpcDevices,
} from "../../../src/plan/decide/rpc-devices.ts";
import { CoreError } from "../../../src/protocol/errors.ts";
import type { WorkerReport } from "../../../src/rpc/client.ts";
import { coreErrorOf } from "../../fixtures/core-error.ts";
import { GIB, usage } from "./fake-fit.ts";

const MIB = 2 ** 20;
const workers = (...entries: unknown[]) => ConfigSchema.parse({ llama: { rpc: entries } }).llama.rpc;
const up = (endpoint: string, ...free: number[]): WorkerReport => ({
  endpoint,
  ok: true,
  version: { major: 5, minor: 1, patch: 0 },
  devices: free.map((f) => ({ free_bytes: f, total_bytes: 2 * f })),
  ms: 1,
});
const LOCAL: Budgets = {
  ram: { total: 16 * GIB, available: 12 * GIB, margin: GIB, budget: 11 * GIB },
  gpus: [{ i: 0, total: 8 * GIB, available: 8 * GIB, margin: 0, budget: 8 * GIB, unified: false, name: "G" }],
};

describe("rpcDevices", () => {
  test("a worker's devices get RAM's margin, numbered over the workers used; left-out ones do not take a number", () => {
    const rpc = rpcDevices(workers("a:1", "b:1", "c:1"), [
      up("a:1", 8 * GIB, 4 * GIB),
      { endpoint: "b:1", ok: false, failure: "timeout", message: "did not answer", ms: 2000 },
      up("c:1", 10 * GIB),
    ]);
    expect(rpc.used).toEqual(["a:1", "c:1"]);
    expect(rpc.budgets.map((b) => [b.remote?.id, b.remote?.device, b.margin, b.budget])).toEqual([
      ["rpc0", 0, Math.floor(1.6 * GIB), 8 * GIB - Math.floor(1.6 * GIB)],
      ["rpc1", 1, Math.floor(819.2 * MIB), 4 * GIB - Math.floor(819.2 * MIB)],
      ["rpc2", 0, 2 * GIB, 8 * GIB],
    ]);
    expect(rpc.workers.map((w) => [w.status, w.left_out, w.devices])).toEqual([
      ["used", null, ["rpc0", "rpc1"]],
      ["left_out", "timeout", []],
      ["used", null, ["rpc2"]],
    ]);
    expect(rpc.warnings).toEqual(["RPC worker b:1 left out: did not answer"]);
  });

  test("a worker reached under two names is used once: the second is left out as same_worker, naming the first", () => {
    const at = (r: WorkerReport, address: string): WorkerReport => ({ ...r, address }) as WorkerReport;
    const rpc = rpcDevices(workers("box:1", "10.0.0.5:1", "c:1"), [
      at(up("box:1", 8 * GIB), "10.0.0.5:1"),
      at(up("10.0.0.5:1", 8 * GIB), "10.0.0.5:1"),
      at(up("c:1", 8 * GIB), "10.0.0.6:1"),
    ]);
    expect(rpc.used).toEqual(["box:1", "c:1"]);
    expect(rpc.workers[1]).toMatchObject({ status: "left_out", left_out: "same_worker" });
    expect(rpc.workers[1]!.reason).toContain("the same worker as box:1 (both reach 10.0.0.5:1)");
  });

  test("no more offload devices than --tensor-split takes: llama-server refuses 16 shares (llama_max_devices() 16, '>=')", () => {
    const names = Array.from({ length: 17 }, (_, i) => `w${i}:1`);
    const rpc = rpcDevices(
      workers(...names),
      names.map((n) => up(n, 8 * GIB)),
    );
    expect(rpc.used).toHaveLength(15);
    expect(rpc.workers.slice(15).map((w) => w.left_out)).toEqual(["too_many_devices", "too_many_devices"]);
    expect(rpc.workers[15]!.reason).toContain("more than the 15 devices");
    // Local GPUs come after the workers in the split and take their places first.
    expect(
      rpcDevices(
        workers(...names),
        names.map((n) => up(n, 8 * GIB)),
        2,
      ).used,
    ).toHaveLength(13);
    // A worker whose devices do not all fit is left out whole; a smaller one after it still fits.
    const big = rpcDevices(workers("a:1", "b:1", "c:1"), [
      up("a:1", ...Array(10).fill(GIB * 8)),
      up("b:1", ...Array(6).fill(GIB * 8)),
      up("c:1", GIB * 8),
    ]);
    expect(big.used).toEqual(["a:1", "c:1"]);
  });

  test("the small margin is 512 MiB; memory_bytes is the budget as given, spread by what each device reports", () => {
    const small = rpcDevices(workers("a:1"), [up("a:1", GIB)]);
    expect(small.budgets[0]).toMatchObject({ margin: 512 * MIB, budget: 512 * MIB });
    const set = rpcDevices(workers({ endpoint: "a:1", memory_bytes: 3 * GIB }), [up("a:1", 2 * GIB, GIB)]);
    expect(set.budgets.map((b) => [b.margin, b.budget])).toEqual([
      [0, 2 * GIB],
      [0, GIB],
    ]);
  });

  test("RPC devices come before local GPUs, and the device table marks them remote", () => {
    const rpc = rpcDevices(workers("a:1"), [up("a:1", 4 * GIB)]);
    const budgets = withRpcDevices(LOCAL, rpc);
    expect(budgets.gpus.map((g) => g.remote?.id ?? `gpu${g.i}`)).toEqual(["rpc0", "gpu0"]);
    const rows = devicePlans(
      budgets,
      { cpu: usage(GIB), gpus: [usage(GIB), usage(GIB)], kv_cells_per_slot: 256, total: 3 * GIB },
      null,
    );
    expect(rows.map((r) => [r.id, r.kind, r.endpoint])).toEqual([
      ["cpu", "cpu", undefined],
      ["rpc0", "rpc", "a:1"],
      ["gpu0", "gpu", undefined],
    ]);
  });
});

describe("the RPC decisions", () => {
  test("--rpc lists the workers used; with none, no flag and why", () => {
    const some = rpcDevices(workers("a:1", "b:1"), [up("a:1", 4 * GIB), up("b:1", 4 * GIB)]);
    expect(rpcDecision(some)).toMatchObject({
      name: "rpc",
      value: "a:1,b:1",
      source: "config",
      flags: ["--rpc", "a:1,b:1"],
    });
    const none = rpcDevices(workers("a:1"), []);
    expect(rpcDecision(none)).toMatchObject({ flags: [], value: null });
    expect(rpcDecision(none).reason).toContain("left out: a:1 (not checked)");
  });

  test("--tensor-split is each device's layer count, the head on the last; none without workers or layers", () => {
    const budgets = withRpcDevices(LOCAL, rpcDevices(workers("a:1"), [up("a:1", 4 * GIB)]));
    const est = {
      cpu: usage(GIB, { layers: 2 }),
      gpus: [usage(GIB, { layers: 10 }), usage(GIB, { layers: 20 })],
      kv_cells_per_slot: 256,
      total: 3 * GIB,
    };
    const split = decideTensorSplit(budgets, est, 32, 33);
    expect(split?.decision).toMatchObject({
      name: "tensor_split",
      value: "10,21",
      flags: ["--tensor-split", "10,21"],
    });
    expect(split?.decision.reason).toContain("rpc0 (a:1) 10 layers");
    expect(split?.decision.reason).toContain("gpu0 (G) 20 layers and the output head");
    expect(split?.decision.reason).toContain("the CPU keeps 2 layers");
    expect(decideTensorSplit(budgets, est, 32, 30)?.value).toEqual([10, 20]);
    expect(decideTensorSplit(LOCAL, { ...est, gpus: [usage(GIB, { layers: 20 })] }, 32, 33)).toBeNull();
    const nothing = { ...est, gpus: [usage(GIB, { layers: 0 }), usage(GIB, { layers: 0 })] };
    expect(decideTensorSplit(budgets, nothing, 32, 0)).toBeNull();
  });

  test("-ngl's reason with workers", () => {
    expect(rpcLayersReason(33, 32, 0)).toBe("all 32 layers and the output head fit on the RPC workers");
    expect(rpcLayersReason(20, 32, 1)).toBe(
      "20 of 32 layers fit on the RPC workers and the GPU; the rest run on the CPU",
    );
    expect(rpcLayersReason(0, 32, 0)).toContain("CPU only");
  });

  test("a placement's model_plan_error names the workers left out; other errors pass unchanged", () => {
    const rpc = rpcDevices(workers("a:1"), [
      { endpoint: "a:1", ok: false, failure: "refused", message: "connection refused", ms: 1 },
    ]);
    const err = coreErrorOf(() =>
      explainingLeftOut(rpc, () => {
        throw new CoreError("model_plan_error", "does not fit", { device: "RAM" });
      }),
    );
    expect(err.message).toBe(
      "does not fit; planned without the RPC worker it could not use: a:1 (connection refused)",
    );
    expect(err.data).toEqual({
      device: "RAM",
      rpc_workers_left_out: [{ endpoint: "a:1", reason: "connection refused" }],
    });
    const other = new CoreError("config_invalid", "x");
    expect(() =>
      explainingLeftOut(rpc, () => {
        throw other;
      }),
    ).toThrow(other);
  });
});
