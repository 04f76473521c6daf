import { describe, expect, test } from "bun:test";
import { type ProbeEnv, probeHardware } from "../../src/plan/probe.ts";

const GIB = 2 ** 30;

function windowsEnv(windows: ProbeEnv["windows"]): ProbeEnv {
  return {
    platform: "win32",
    arch: "x64",
    run: async () => ({ kind: "absent" }),
    readText: async () => null,
    cpus: () => Array.from({ length: 16 }, () => ({ model: "Fake Windows CPU" })),
    totalmem: () => 32 * GIB,
    freemem: () => 4 * GIB,
    now: () => 0,
    windows,
  };
}

describe("the hardware probe on Windows", () => {
  test("physical cores and available memory come from kernel32's counts", async () => {
    const hw = await probeHardware(
      windowsEnv({
        processorCores: () => ({ cores: 8, logical: 16 }),
        physicalMemory: () => ({ total_bytes: 32 * GIB, available_bytes: 20 * GIB }),
      }),
    );
    expect(hw.cpu).toMatchObject({ logical: 16, physical: 8 });
    expect(hw.ram).toEqual({ total_bytes: 32 * GIB, available_bytes: 20 * GIB });
    expect(hw.probes.find((p) => p.id === "cpu")?.message).toBe("16 logical, 8 physical cores");
    expect(hw.probes.find((p) => p.id === "ram")?.message).toContain("GlobalMemoryStatusEx");
  });

  test("a refused reading leaves cores unknown and memory to the OS totals", async () => {
    const hw = await probeHardware(windowsEnv({ processorCores: () => null, physicalMemory: () => null }));
    expect(hw.cpu.physical).toBeNull();
    expect(hw.ram).toEqual({ total_bytes: 32 * GIB, available_bytes: 4 * GIB });
    expect(hw.probes.find((p) => p.id === "cpu")?.message).toBe("16 logical, ? physical cores");
  });
});
