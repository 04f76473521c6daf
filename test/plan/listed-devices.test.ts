import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  backendOfDevice,
  parseListDevices,
  reconcileGpus,
  vendorOfDevice,
} from "../../src/plan/listed-devices.ts";
import type { GpuInfo } from "../../src/protocol/plan.ts";
import { GIB, testGpu } from "../fixtures/hardware.ts";

const MIB = 2 ** 20;
const RAM = { total_bytes: 32 * GIB, available_bytes: 28 * GIB };
const TRANSCRIPTS = join(import.meta.dir, "../fixtures/llama-server/transcripts");

/** The listing's line, as common/arg.cpp prints it: `  <name>: <description> (<total> MiB, <free> MiB free)`. */
const line = (name: string, description: string, total: number, free: number) =>
  `  ${name}: ${description} (${total} MiB, ${free} MiB free)`;
const listing = (...lines: string[]) => ["Available devices:", ...lines, ""].join("\n");

describe("parseListDevices", () => {
  test("a CPU build's answer (recording 84): no device at all, not a failure", () => {
    const recorded = readFileSync(join(TRANSCRIPTS, "84-list-devices-with-rpc.txt"), "utf8");
    // The transcript's command line and exit code frame the program's stdout.
    const stdout = recorded
      .split("\n")
      .filter((l) => !l.startsWith("$ ") && !l.startsWith("exit "))
      .join("\n");
    expect(parseListDevices(stdout)).toEqual([]);
  });

  test("devices with their memory; a description's own parentheses kept", () => {
    const out = listing(
      line("Vulkan0", "AMD Radeon RX 7900 XTX (RADV NAVI31)", 24560, 23900),
      line("Vulkan1", "Intel(R) UHD Graphics 770 (ADL-S GT1)", 15800, 15800),
    );
    expect(parseListDevices(out)).toEqual([
      {
        name: "Vulkan0",
        description: "AMD Radeon RX 7900 XTX (RADV NAVI31)",
        total_bytes: 24560 * MIB,
        free_bytes: 23900 * MIB,
      },
      {
        name: "Vulkan1",
        description: "Intel(R) UHD Graphics 770 (ADL-S GT1)",
        total_bytes: 15800 * MIB,
        free_bytes: 15800 * MIB,
      },
    ]);
  });

  test("not a listing (a build without the flag, garbage): null, so the vendor tools decide", () => {
    expect(parseListDevices("error: invalid argument: --list-devices\n")).toBeNull();
    expect(parseListDevices("")).toBeNull();
    expect(parseListDevices("Available devices:\n  CUDA0 something odd\n")).toBeNull();
  });
});

describe("the device's backend and vendor", () => {
  test("from the name where the backend says, else from the description", () => {
    expect(backendOfDevice("CUDA1")).toBe("cuda");
    expect(backendOfDevice("ROCm0")).toBe("rocm");
    expect(backendOfDevice("MTL0")).toBe("metal");
    expect(backendOfDevice("Vulkan2")).toBe("vulkan");
    expect(backendOfDevice("SYCL0")).toBe("sycl");
    expect(backendOfDevice("GPUOpenCL")).toBe("opencl");
    expect(backendOfDevice("Mystery0")).toBe("other");
    expect(vendorOfDevice({ name: "CUDA0", description: "GB10" })).toBe("nvidia");
    expect(vendorOfDevice({ name: "Vulkan0", description: "NVIDIA GeForce RTX 3060" })).toBe("nvidia");
    expect(vendorOfDevice({ name: "Vulkan0", description: "AMD Radeon 780M (RADV GFX1103_R1)" })).toBe("amd");
    expect(vendorOfDevice({ name: "SYCL0", description: "Intel(R) Arc(TM) A770 Graphics" })).toBe("intel");
    expect(vendorOfDevice({ name: "Vulkan0", description: "Moore Threads S80" })).toBe("other");
  });
});

const nvidia = (over: Partial<GpuInfo> = {}): GpuInfo => ({
  ...testGpu(),
  name: "NVIDIA GeForce RTX 4090",
  total_bytes: 24 * GIB,
  free_bytes: 23 * GIB,
  ...over,
});

describe("reconcileGpus", () => {
  test("a CUDA build: nvidia-smi's GPU, named as llama-server names it", () => {
    const listed = parseListDevices(listing(line("CUDA0", "NVIDIA GeForce RTX 4090", 24080, 23500)))!;
    const r = reconcileGpus([nvidia()], listed, RAM, "/opt/llama-server");
    // What nvidia-smi said is kept (its driver, its memory figures); the name is llama-server's.
    expect(r.gpus).toEqual([{ ...nvidia(), device: "CUDA0" }]);
    expect(r.unused).toEqual([]);
    expect(r.message).toContain("CUDA0 NVIDIA GeForce RTX 4090");
  });

  test("a CPU build beside an NVIDIA GPU: nothing is offloaded, and the plan is told why", () => {
    const r = reconcileGpus([nvidia()], [], RAM, "/opt/llama-server");
    expect(r.gpus).toEqual([]);
    expect(r.unused).toHaveLength(1);
    expect(r.unused[0]).toContain("NVIDIA GeForce RTX 4090 is not used");
    expect(r.unused[0]).toContain("/opt/llama-server");
    expect(r.unused[0]).toContain("CUDA or Vulkan");
  });

  test("a Vulkan build on an AMD card no vendor tool saw: planned, on the listing's figures", () => {
    const listed = parseListDevices(
      listing(line("Vulkan0", "AMD Radeon RX 7800 XT (RADV NAVI32)", 16368, 15000)),
    )!;
    const r = reconcileGpus([], listed, RAM, "llama-server");
    expect(r.gpus).toEqual([
      {
        index: 0,
        vendor: "amd",
        name: "AMD Radeon RX 7800 XT (RADV NAVI32)",
        backend: "vulkan",
        total_bytes: 16368 * MIB,
        free_bytes: 15000 * MIB,
        unified: false,
        driver: null,
        compute_capability: null,
        device: "Vulkan0",
      },
    ]);
  });

  test("an integrated GPU is planned as sharing the RAM; a discrete card as having its own", () => {
    const shared = (description: string, totalMib = 8000) =>
      reconcileGpus(
        [],
        parseListDevices(listing(line("Vulkan0", description, totalMib, totalMib)))!,
        RAM,
        "x",
      ).gpus[0]!.unified;
    for (const integrated of [
      "Intel(R) Iris(R) Xe Graphics",
      "Intel(R) UHD Graphics 770 (ADL-S GT1)",
      "Intel(R) Arc(TM) Graphics",
      "AMD Radeon 780M (RADV GFX1103_R1)",
      "AMD Radeon(TM) Graphics",
      "AMD Radeon 8060S Graphics",
      "AMD Radeon Vega 8 Graphics",
    ])
      expect([integrated, shared(integrated)]).toEqual([integrated, true]);
    for (const discrete of [
      "Intel(R) Arc(TM) A770 Graphics (DG2)",
      "Intel(R) Arc(TM) B580 Graphics",
      "AMD Radeon RX 7600M XT",
      "AMD Radeon PRO W7900",
      "NVIDIA GeForce RTX 3060",
      "Moore Threads S80",
    ])
      expect([discrete, shared(discrete)]).toEqual([discrete, false]);
    // Nothing in the name: a memory of nearly all the RAM can only be the RAM.
    expect(shared("Mystery GPU", 31000)).toBe(true);
  });

  test("a vouched-for GPU beside one no tool vouches for (a laptop's iGPU): the vouched one alone", () => {
    const listed = parseListDevices(
      listing(
        line("Vulkan0", "NVIDIA GeForce RTX 4090", 24564, 23000),
        line("Vulkan1", "Intel(R) UHD Graphics 770 (ADL-S GT1)", 15800, 15800),
      ),
    )!;
    const r = reconcileGpus([nvidia()], listed, RAM, "llama-server");
    expect(r.gpus.map((g) => [g.device, g.backend, g.vendor])).toEqual([["Vulkan0", "vulkan", "nvidia"]]);
    expect(r.message).toContain("Vulkan1 Intel(R) UHD Graphics 770");
  });

  test("several GPUs pair by name first, then in order, in llama-server's order", () => {
    // CUDA orders the fastest first; nvidia-smi by PCI bus.
    const small = nvidia({ index: 0, name: "NVIDIA GeForce RTX 3060", total_bytes: 12 * GIB });
    const big = nvidia({ index: 1 });
    const listed = parseListDevices(
      listing(
        line("CUDA0", "NVIDIA GeForce RTX 4090", 24080, 23500),
        line("CUDA1", "NVIDIA GeForce RTX 3060", 12000, 11800),
      ),
    )!;
    const r = reconcileGpus([small, big], listed, RAM, "llama-server");
    expect(r.gpus.map((g) => [g.index, g.device, g.name])).toEqual([
      [0, "CUDA0", "NVIDIA GeForce RTX 4090"],
      [1, "CUDA1", "NVIDIA GeForce RTX 3060"],
    ]);
  });

  test("a GPU hidden from llama-server (CUDA_VISIBLE_DEVICES) is named as not used", () => {
    const listed = parseListDevices(listing(line("CUDA0", "NVIDIA GeForce RTX 4090", 24080, 23500)))!;
    const r = reconcileGpus([nvidia(), nvidia({ index: 1, name: "NVIDIA A100" })], listed, RAM, "x");
    expect(r.gpus).toHaveLength(1);
    expect(r.unused).toEqual(["NVIDIA A100 is not used: it is not among llama-server's devices (CUDA0)"]);
  });

  test("a software renderer a Vulkan loader lists is no GPU", () => {
    const listed = parseListDevices(
      listing(line("Vulkan0", "llvmpipe (LLVM 15.0.7, 256 bits)", 32000, 32000)),
    )!;
    expect(reconcileGpus([], listed, RAM, "x").gpus).toEqual([]);
  });
});
