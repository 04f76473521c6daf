import type { Config } from "../../config/schema.ts";
import type { HardwareSnapshot } from "../../protocol/plan.ts";

/**
 * What each device may spend: what it has available minus a margin for the OS, the driver and
 * other programs. A budget set in the config (`hardware.ram_bytes/vram_bytes`) is taken as
 * given, with no margin.
 */

const MIB = 1024 * 1024;

export interface RamBudget {
  total: number;
  available: number;
  margin: number;
  budget: number;
}

export interface GpuBudget extends RamBudget {
  /** The GPU's place in the hardware snapshot (its id is `gpu<i>`). */
  i: number;
  unified: boolean;
  name: string;
  /** A device of an RPC worker (decide/rpc-devices.ts) rather than a local GPU. */
  remote?: RemoteDevice;
}

export interface RemoteDevice {
  /** `rpc<N>`, N as llama-server numbers RPC devices. */
  id: string;
  endpoint: string;
  /** The device's index on its worker. */
  device: number;
}

export interface Budgets {
  ram: RamBudget;
  /**
   * GPUs with something to spend, the only ones the plan uses; with RPC workers, their devices
   * come first, as in llama-server's own device order.
   */
  gpus: GpuBudget[];
}

type Overrides = Config["hardware"];

/**
 * What a start that ran out of memory with layers on a GPU adds to each GPU's margin, per such
 * start (runtime/launcher.ts plans again with it): the part of a GPU's memory the estimate does not
 * see (the CUDA context, cuBLAS, the driver's own) is not calibrated on real GPUs yet
 * (docs/plan.md "Budgets and margins").
 */
export function outOfMemoryMargin(gpuTotal: number, starts: number): number {
  return starts * Math.max(512 * MIB, Math.floor(gpuTotal * 0.1));
}

/**
 * Budgets from a snapshot the overrides were already applied to (`applyOverrides`); `outOfMemory`:
 * starts of this model that ran out of memory with layers on a GPU (PlanConfig.gpu_out_of_memory).
 */
export function memoryBudgets(hw: HardwareSnapshot, overrides: Overrides, outOfMemory = 0): Budgets {
  const total = hw.ram.total_bytes;
  const available = hw.ram.available_bytes ?? Math.floor(total / 2);
  const ramMargin = overrides.ram_bytes !== null ? 0 : Math.max(512 * MIB, Math.floor(total * 0.1));
  const ramBudget = Math.max(0, available - ramMargin);
  const gpus = hw.gpus.map((g, i): GpuBudget => {
    const margin =
      (overrides.vram_bytes !== null ? 0 : Math.max(512 * MIB, Math.floor(g.total_bytes * 0.05))) +
      outOfMemoryMargin(g.total_bytes, outOfMemory);
    let budget = Math.max(0, g.free_bytes - margin);
    // Unified memory: the GPU can never take more than what RAM has free.
    if (g.unified) budget = Math.min(budget, ramBudget);
    return {
      i,
      total: g.total_bytes,
      available: g.free_bytes,
      margin,
      budget,
      unified: g.unified,
      name: g.name,
    };
  });
  return {
    ram: { total, available, margin: ramMargin, budget: ramBudget },
    gpus: gpus.filter((g) => g.budget > 0),
  };
}

/**
 * What the plan says of the GPUs: a GPU a vendor tool found that llama-server will not use
 * (plan/listed-devices.ts), and a VRAM budget with no GPU to apply it to, which is ignored.
 */
export function hardwareWarnings(overrides: Overrides, hw: HardwareSnapshot, outOfMemory = 0): string[] {
  const warnings = [...(hw.gpus_unused ?? [])];
  if (overrides.vram_bytes !== null && overrides.vram_bytes > 0 && hw.gpus.length === 0)
    warnings.push("hardware.vram_bytes is set but no GPU was detected: it is ignored");
  if (outOfMemory > 0 && hw.gpus.length > 0)
    warnings.push(
      `llama-server ran out of memory starting this model with layers on the GPU (${outOfMemory === 1 ? "once" : `${outOfMemory} times`}): this plan keeps ${hw.gpus
        .map((g) => `${Math.round(outOfMemoryMargin(g.total_bytes, outOfMemory) / MIB)} MiB`)
        .join(", ")} more of ${hw.gpus.length === 1 ? "the GPU" : "each GPU"} free`,
    );
  return warnings;
}
