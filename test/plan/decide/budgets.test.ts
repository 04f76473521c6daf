import { describe, expect, test } from "bun:test";
import { hardwareWarnings, memoryBudgets, outOfMemoryMargin } from "../../../src/plan/decide/budgets.ts";
import type { GpuInfo, HardwareSnapshot } from "../../../src/protocol/plan.ts";
import { cpuOnlyMachine, testGpu } from "../../fixtures/hardware.ts";

const GIB = 2 ** 30;
const MIB = 2 ** 20;
const NO_OVERRIDES = { ram_bytes: null, vram_bytes: null };

function gpu(over: Partial<GpuInfo>): GpuInfo {
  return { ...testGpu(), driver: null, compute_capability: null, ...over };
}

const machine = (over: Partial<HardwareSnapshot>) => cpuOnlyMachine(over);

describe("memoryBudgets", () => {
  test("RAM keeps max(512 MiB, 10% of total) free", () => {
    const b = memoryBudgets(
      machine({ ram: { total_bytes: 32 * GIB, available_bytes: 28 * GIB } }),
      NO_OVERRIDES,
    );
    expect(b.ram).toEqual({
      total: 32 * GIB,
      available: 28 * GIB,
      margin: Math.floor(3.2 * GIB),
      budget: 28 * GIB - Math.floor(3.2 * GIB),
    });
    const small = memoryBudgets(
      machine({ ram: { total_bytes: 2 * GIB, available_bytes: GIB } }),
      NO_OVERRIDES,
    );
    expect(small.ram.margin).toBe(512 * MIB);
  });

  test("unknown available RAM counts as half the total; a budget never goes below 0", () => {
    const b = memoryBudgets(machine({ ram: { total_bytes: 16 * GIB, available_bytes: null } }), NO_OVERRIDES);
    expect(b.ram.available).toBe(8 * GIB);
    const none = memoryBudgets(machine({ ram: { total_bytes: 16 * GIB, available_bytes: 0 } }), NO_OVERRIDES);
    expect(none.ram.budget).toBe(0);
  });

  test("a GPU keeps max(512 MiB, 5% of total) free; full GPUs are left out, the rest keep their place", () => {
    const b = memoryBudgets(
      machine({
        gpus: [
          gpu({ free_bytes: 0.2 * GIB, name: "full" }),
          gpu({ index: 1, total_bytes: 24 * GIB, free_bytes: 23 * GIB, name: "big" }),
        ],
      }),
      NO_OVERRIDES,
    );
    expect(b.gpus).toHaveLength(1);
    expect(b.gpus[0]).toMatchObject({ i: 1, name: "big", margin: Math.floor(1.2 * GIB) });
    expect(b.gpus[0]!.budget).toBe(23 * GIB - Math.floor(1.2 * GIB));
  });

  test("a unified GPU can never take more than RAM's budget", () => {
    const b = memoryBudgets(
      machine({
        ram: { total_bytes: 16 * GIB, available_bytes: 6 * GIB },
        gpus: [gpu({ unified: true, total_bytes: 10 * GIB, free_bytes: 10 * GIB })],
      }),
      NO_OVERRIDES,
    );
    expect(b.gpus[0]!.budget).toBe(b.ram.budget);
  });

  test("configured budgets are taken as given, with no margin", () => {
    const b = memoryBudgets(
      machine({
        ram: { total_bytes: 4 * GIB, available_bytes: 4 * GIB },
        gpus: [gpu({ free_bytes: 6 * GIB })],
      }),
      { ram_bytes: 4 * GIB, vram_bytes: 6 * GIB },
    );
    expect(b.ram.margin).toBe(0);
    expect(b.ram.budget).toBe(4 * GIB);
    expect(b.gpus[0]).toMatchObject({ margin: 0, budget: 6 * GIB });
  });
});

describe("hardwareWarnings", () => {
  const none = machine({});
  const one = machine({ gpus: [gpu({})] });
  test("a VRAM budget with no GPU detected is ignored, saying so", () => {
    expect(hardwareWarnings({ ram_bytes: null, vram_bytes: 4 * GIB }, none)).toEqual([
      "hardware.vram_bytes is set but no GPU was detected: it is ignored",
    ]);
    expect(hardwareWarnings({ ram_bytes: null, vram_bytes: 0 }, none)).toEqual([]);
    expect(hardwareWarnings({ ram_bytes: null, vram_bytes: 4 * GIB }, one)).toEqual([]);
    expect(hardwareWarnings(NO_OVERRIDES, none)).toEqual([]);
  });
  test("a GPU llama-server will not use is said first (listed-devices.ts)", () => {
    const unused = machine({ gpus_unused: ["RTX is not used: no GPU backend"] });
    expect(hardwareWarnings({ ram_bytes: null, vram_bytes: 4 * GIB }, unused)).toEqual([
      "RTX is not used: no GPU backend",
      "hardware.vram_bytes is set but no GPU was detected: it is ignored",
    ]);
    expect(hardwareWarnings(NO_OVERRIDES, unused)).toEqual(["RTX is not used: no GPU backend"]);
  });
});

describe("after starts that ran out of GPU memory (runtime/launcher.ts)", () => {
  const card = (total: number, free: number) =>
    machine({
      ram: { total_bytes: 32 * GIB, available_bytes: 28 * GIB },
      gpus: [gpu({ total_bytes: total, free_bytes: free })],
    });
  test("each such start keeps another max(512 MiB, 10% of the GPU) free, on top of the margin", () => {
    expect(outOfMemoryMargin(4 * GIB, 1)).toBe(512 * MIB);
    expect(outOfMemoryMargin(24 * GIB, 2)).toBe(2 * Math.floor(2.4 * GIB));
    expect(outOfMemoryMargin(24 * GIB, 0)).toBe(0);
    const small = card(4 * GIB, 3900 * MIB);
    expect(memoryBudgets(small, NO_OVERRIDES).gpus[0]?.budget).toBe(3900 * MIB - 512 * MIB);
    expect(memoryBudgets(small, NO_OVERRIDES, 1).gpus[0]?.budget).toBe(3900 * MIB - 1024 * MIB);
    expect(memoryBudgets(small, NO_OVERRIDES, 1).ram).toEqual(memoryBudgets(small, NO_OVERRIDES).ram);
    // A budget from the config has no margin of its own, but gets this one.
    const given = { ram_bytes: null, vram_bytes: 3 * GIB };
    expect(memoryBudgets(small, given, 2).gpus[0]?.margin).toBe(1024 * MIB);
  });
  test("the plan says so, with what it keeps free", () => {
    expect(hardwareWarnings(NO_OVERRIDES, card(8 * GIB, 7 * GIB), 1)).toEqual([
      "llama-server ran out of memory starting this model with layers on the GPU (once): this plan keeps 819 MiB more of the GPU free",
    ]);
    expect(hardwareWarnings(NO_OVERRIDES, machine({}), 1)).toEqual([]);
  });
});
