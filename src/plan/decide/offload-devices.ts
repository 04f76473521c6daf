import type { Decision, HardwareSnapshot } from "../../protocol/plan.ts";
import { flags } from "../argv.ts";

/**
 * `--device`, only where llama-server lists a device the plan leaves out (docs/plan.md "Which
 * GPUs"): a second discrete card no vendor tool vouches for, beside one a tool does, would
 * otherwise get layers by its free memory, and a `--tensor-split` planned for the vouched GPUs
 * would land on the wrong devices. Naming the planned GPUs keeps llama-server to them. Not with
 * RPC workers (their devices would have to be named too), nor with no layers on a GPU, nor
 * where a planned GPU has no listed name (a binary that did not list its devices).
 */
export function decideOffloadDevices(
  hw: Pick<HardwareSnapshot, "gpus" | "devices_left_out">,
  gpuLayers: number,
  rpcWorkers: number,
): { value: string[] | null; decision?: Decision } {
  const left = hw.devices_left_out ?? [];
  const names = hw.gpus.map((g) => g.device);
  if (left.length === 0 || gpuLayers === 0 || rpcWorkers > 0 || names.length === 0) return { value: null };
  if (names.some((n) => n === undefined)) return { value: null };
  const value = names as string[];
  return {
    value,
    decision: {
      name: "devices",
      value: value.join(","),
      source: "auto",
      flags: flags.devices(value),
      reason: `llama-server lists ${left.join(", ")}, which no vendor tool vouches for and the plan leaves out: it offloads to the planned GPU${value.length === 1 ? "" : "s"} only`,
    },
  };
}
