import type { DevicePlan } from "../../protocol/plan.ts";
import type { Estimate } from "../estimate.ts";
import type { Budgets } from "./budgets.ts";

/**
 * The plan's per-device table: what each device has, its budget, what the chosen launch uses
 * there and what is left. Unified GPUs draw on RAM, so their use is taken from RAM's too.
 */
export function devicePlans(b: Budgets, est: Estimate, cpuName: string | null): DevicePlan[] {
  const unifiedUse = est.gpus.reduce((a, u, k) => a + (b.gpus[k]?.unified ? u.total : 0), 0);
  return [
    {
      id: "cpu",
      kind: "cpu",
      name: cpuName ?? "CPU",
      unified: false,
      total_bytes: b.ram.total,
      available_bytes: b.ram.available,
      margin_bytes: b.ram.margin,
      budget_bytes: b.ram.budget,
      usage: { ...est.cpu, cache_ram: 0, projector: 0 },
      free_after_bytes: b.ram.budget - est.cpu.total - unifiedUse,
    },
    ...b.gpus.map(
      (g, k): DevicePlan => ({
        id: g.remote?.id ?? `gpu${g.i}`,
        kind: g.remote ? "rpc" : "gpu",
        name: g.name,
        ...(g.remote ? { endpoint: g.remote.endpoint } : {}),
        unified: g.unified,
        total_bytes: g.total,
        available_bytes: g.available,
        margin_bytes: g.margin,
        budget_bytes: g.budget,
        usage: { ...est.gpus[k]!, cache_ram: 0, projector: 0 },
        free_after_bytes: g.budget - est.gpus[k]!.total,
      }),
    ),
  ];
}

/**
 * What a model whose plan lists the device holds there while it runs: the plan's `usage.total`,
 * or an RPC worker's device whole, however few layers it puts there (a worker serves one
 * llama-server at a time: ggml-rpc-server's accept loop), so no other model is held beside it.
 * The scheduler's footprint and the pinned set's check count it alike.
 */
export function heldOnDevice(d: Pick<DevicePlan, "kind" | "usage" | "budget_bytes">): number {
  return d.kind === "rpc" ? Math.max(d.budget_bytes, d.usage.total) : d.usage.total;
}
