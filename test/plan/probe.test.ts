import { describe, expect, test } from "bun:test";
import { chmodSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  appleGpuBudget,
  applyOverrides,
  parseCpuinfo,
  parseMeminfo,
  parseNvidiaSmi,
  parseRocmSmi,
} from "../../src/plan/hardware.ts";
import { type ProbeEnv, probeHardware, type RunResult, runWithTimeout } from "../../src/plan/probe.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const GIB = 2 ** 30;

function fakeEnv(over: Partial<ProbeEnv> & { tools?: Record<string, RunResult> } = {}): ProbeEnv {
  const tools = over.tools ?? {};
  return {
    platform: "linux",
    arch: "x64",
    run: async (cmd) => tools[cmd] ?? { kind: "absent" },
    readText: async (path) =>
      path === "/proc/meminfo"
        ? "MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"
        : path === "/proc/cpuinfo"
          ? "model name\t: Fake CPU\nphysical id\t: 0\ncore id\t: 0\nflags\t: fpu avx avx2 fma\n\nmodel name\t: Fake CPU\nphysical id\t: 0\ncore id\t: 0\n\nmodel name\t: Fake CPU\nphysical id\t: 0\ncore id\t: 1\n"
          : null,
    cpus: () => [{ model: "Fake CPU" }, { model: "Fake CPU" }, { model: "Fake CPU" }],
    totalmem: () => 32 * GIB,
    freemem: () => 4 * GIB,
    now: () => 0,
    ...over,
  };
}

describe("parsers", () => {
  test("meminfo uses MemAvailable", () => {
    expect(parseMeminfo("MemTotal: 1024 kB\nMemAvailable: 512 kB\n")).toEqual({
      total_bytes: 1024 * 1024,
      available_bytes: 512 * 1024,
    });
    expect(parseMeminfo("garbage")).toBeNull();
  });
  test("cpuinfo counts physical cores and SIMD flags", () => {
    const c = parseCpuinfo(
      "model name : X\nphysical id : 0\ncore id : 0\nflags : avx2 sse\n\nphysical id : 0\ncore id : 0\n\nphysical id : 0\ncore id : 3\n",
    );
    expect(c).toEqual({ model: "X", physical: 2, flags: ["avx2"] });
  });
  test("nvidia-smi CSV, and garbage rejected", () => {
    const g = parseNvidiaSmi("0, NVIDIA GeForce RTX 4090, 24564, 23000, 550.54.14, 8.9\n");
    expect(g?.[0]).toMatchObject({
      name: "NVIDIA GeForce RTX 4090",
      total_bytes: 24564 * 2 ** 20,
      driver: "550.54.14",
      compute_capability: "8.9",
    });
    expect(
      parseNvidiaSmi("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
    ).toBeNull();
    expect(parseNvidiaSmi("\u0000\u0001garbage, x, y, z, w")).toBeNull();
  });
  // NVIDIA's DGX Spark known issues: nvidia-smi reports no memory for the GB10, whose GPU shares
  // the system's memory ("0, NVIDIA GB10, [N/A], [N/A]"). It was "not a GPU list": no GPU at all.
  test("nvidia-smi with no memory of its own ([N/A], a GB10): a unified GPU with the RAM's figures", () => {
    const ram = { total_bytes: 128 * GIB, available_bytes: 120 * GIB };
    const [gb10] = parseNvidiaSmi("0, NVIDIA GB10, [N/A], [N/A], 580.95.05, 12.1\n", ram)!;
    expect(gb10).toMatchObject({
      name: "NVIDIA GB10",
      unified: true,
      total_bytes: 128 * GIB,
      free_bytes: 120 * GIB,
      compute_capability: "12.1",
    });
    // A free figure alone missing: the total, not a refusal.
    expect(parseNvidiaSmi("0, X, 8192, [N/A], 550, [N/A]\n")?.[0]).toMatchObject({
      unified: false,
      free_bytes: 8192 * 2 ** 20,
      compute_capability: null,
    });
    expect(parseNvidiaSmi("0, X, [N/A], 12, 550, 8.9\n")?.[0]?.total_bytes).toBe(0);
  });
  test("rocm-smi JSON", () => {
    const g = parseRocmSmi(
      JSON.stringify({
        card0: {
          "VRAM Total Memory (B)": "17163091968",
          "VRAM Total Used Memory (B)": "1000",
          "Card Series": "RX 7800",
        },
        system: { "Driver version": "6.7" },
      }),
    );
    expect(g?.[0]).toMatchObject({
      vendor: "amd",
      name: "RX 7800",
      free_bytes: 17163091968 - 1000,
      driver: "6.7",
    });
    expect(parseRocmSmi("not json")).toBeNull();
  });
  test("Apple GPU share and config overrides", () => {
    expect(appleGpuBudget(16 * GIB, null)).toBe(Math.floor((16 * GIB * 2) / 3));
    expect(appleGpuBudget(64 * GIB, null)).toBe(48 * GIB);
    expect(appleGpuBudget(64 * GIB, 60000)).toBe(60000 * 2 ** 20);
  });
});

describe("a GPU tool's figures past any GPU's memory", () => {
  test("are garbage, not a GPU to offload to: nvidia-smi's MiB and rocm-smi's bytes past a PiB", () => {
    expect(
      parseNvidiaSmi("0, NVIDIA Fake, 99999999999999999999, 99999999999999999999, 550.54, 8.9"),
    ).toBeNull();
    expect(parseNvidiaSmi("0, NVIDIA Fake, 1073741825, 1000, 550.54, 8.9")).toBeNull();
    expect(parseNvidiaSmi("0, NVIDIA Big, 1073741824, 1000, 550.54, 8.9")?.[0]?.total_bytes).toBe(2 ** 50);
    const rocm = (bytes: string) =>
      parseRocmSmi(
        JSON.stringify({ card0: { "VRAM Total Memory (B)": bytes, "VRAM Total Used Memory (B)": "0" } }),
      );
    expect(rocm("1e30")).toBeNull();
    expect(rocm(String(2 ** 50 + 4096))).toBeNull();
    expect(rocm(String(24 * GIB))?.[0]?.total_bytes).toBe(24 * GIB);
  });
});

describe("probeHardware", () => {
  test("reads CPU and RAM, reports absent tools softly", async () => {
    const h = await probeHardware(fakeEnv());
    expect(h.cpu).toMatchObject({
      model: "Fake CPU",
      logical: 3,
      physical: 2,
      flags: ["avx", "avx2", "fma"],
    });
    expect(h.ram.available_bytes).toBe(20000000 * 1024);
    expect(h.gpus).toEqual([]);
    expect(h.probes.find((p) => p.id === "nvidia-smi")?.status).toBe("absent");
  });
  test("a hung nvidia-smi is reported as timeout, garbage as error; neither throws", async () => {
    const hung = await probeHardware(fakeEnv({ tools: { "nvidia-smi": { kind: "timeout" } } }));
    expect(hung.probes.find((p) => p.id === "nvidia-smi")).toMatchObject({ status: "timeout" });
    const junk = await probeHardware(
      fakeEnv({
        tools: { "nvidia-smi": { kind: "exit", code: 0, stdout: "\u0007@@@ not csv", stderr: "" } },
      }),
    );
    expect(junk.probes.find((p) => p.id === "nvidia-smi")).toMatchObject({ status: "error" });
    expect(junk.gpus).toEqual([]);
  });
  // The probe's message reaches the host (status, doctor): half an emoji at the cut is a lone
  // surrogate, a line a strict JSON parser refuses whole.
  test("a failed tool's last line is quoted cut between characters", async () => {
    const stderr = `${"e".repeat(199)}😀 GPU`;
    const h = await probeHardware(
      fakeEnv({ tools: { "nvidia-smi": { kind: "exit", code: 9, stdout: "", stderr } } }),
    );
    const message = h.probes.find((p) => p.id === "nvidia-smi")?.message ?? "";
    expect(message).toContain("eeee");
    expect(message.isWellFormed()).toBe(true);
  });
  test("NVIDIA GPUs and Apple Silicon become GPUs", async () => {
    const nv = await probeHardware(
      fakeEnv({
        tools: {
          "nvidia-smi": { kind: "exit", code: 0, stdout: "0, RTX, 8192, 8000, 550, 8.6\n", stderr: "" },
        },
      }),
    );
    expect(nv.gpus[0]).toMatchObject({ backend: "cuda", free_bytes: 8000 * 2 ** 20 });
    const gb10 = await probeHardware(
      fakeEnv({
        tools: {
          "nvidia-smi": {
            kind: "exit",
            code: 0,
            stdout: "0, NVIDIA GB10, [N/A], [N/A], 580, 12.1\n",
            stderr: "",
          },
        },
      }),
    );
    expect(gb10.gpus[0]).toMatchObject({
      unified: true,
      total_bytes: gb10.ram.total_bytes,
      free_bytes: gb10.ram.available_bytes!,
    });
    expect(gb10.probes.find((p) => p.id === "nvidia-smi")?.message).toContain("unified");
    const mac = await probeHardware(
      fakeEnv({
        platform: "darwin",
        arch: "arm64",
        readText: async () => null,
        cpus: () => [{ model: "Apple M2" }],
      }),
    );
    expect(mac.gpus[0]).toMatchObject({ vendor: "apple", unified: true, backend: "metal" });
    expect(applyOverrides(mac, { ram_bytes: null, vram_bytes: 4 * GIB }).gpus[0]!.free_bytes).toBe(4 * GIB);
  });
});

/** fakeEnv's files, and these: a control group's, by path. */
function inCgroup(files: Record<string, string>): ProbeEnv {
  const base = fakeEnv();
  return fakeEnv({ readText: async (path) => files[path] ?? base.readText(path) });
}

// fakeEnv's machine: 32768000 kB total (31.25 GiB), 20000000 kB available.
describe("probeHardware in a control group (a container, a systemd unit with MemoryMax)", () => {
  test("cgroup v2: the limit less what the group holds, its inactive page cache not counted", async () => {
    const h = await probeHardware(
      inCgroup({
        "/proc/self/cgroup": "0::/\n",
        "/sys/fs/cgroup/memory.max": "8589934592\n",
        "/sys/fs/cgroup/memory.current": String(3 * GIB),
        "/sys/fs/cgroup/memory.stat": `anon ${GIB}\ninactive_file ${2 * GIB}\nactive_file 0\n`,
      }),
    );
    expect(h.ram).toEqual({ total_bytes: 8 * GIB, available_bytes: 7 * GIB });
    expect(h.probes.find((p) => p.id === "ram")?.message).toContain("cgroup memory limit");
  });

  test("cgroup v1 seen from inside a container: the host's path is not there, the mount's root is the group", async () => {
    const h = await probeHardware(
      inCgroup({
        "/proc/self/cgroup": "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes": String(4 * GIB),
        "/sys/fs/cgroup/memory/memory.usage_in_bytes": String(GIB),
        "/sys/fs/cgroup/memory/memory.stat": "cache 0\ntotal_inactive_file 0\n",
      }),
    );
    expect(h.ram).toEqual({ total_bytes: 4 * GIB, available_bytes: 3 * GIB });
  });

  test("a parent's tighter limit wins; 'max', v1's unlimited and garbage are no limit", async () => {
    const h = await probeHardware(
      inCgroup({
        "/proc/self/cgroup": "0::/user.slice/app.service\n",
        "/sys/fs/cgroup/user.slice/app.service/memory.max": "max\n",
        "/sys/fs/cgroup/user.slice/memory.max": String(2 * GIB),
        "/sys/fs/cgroup/user.slice/memory.current": String(GIB / 2),
        "/sys/fs/cgroup/memory.max": "-1",
      }),
    );
    expect(h.ram).toEqual({ total_bytes: 2 * GIB, available_bytes: 1.5 * GIB });
    for (const limit of ["max", "9223372036854771712", "garbage", String(64 * GIB)]) {
      const free = await probeHardware(
        inCgroup({ "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": limit }),
      );
      expect(free.ram).toEqual({ total_bytes: 32768000 * 1024, available_bytes: 20000000 * 1024 });
    }
  });
});

describe("probeHardware with a CPU affinity (taskset, a container's cpuset)", () => {
  test("the cores counted are those the process may run on: the plan's -t is no more than those", async () => {
    // fakeEnv: 3 logical CPUs, 2 physical cores.
    const h = await probeHardware(fakeEnv({ usableCpus: () => 1 }));
    expect(h.cpu).toMatchObject({ logical: 1, physical: 1 });
    expect(h.probes.find((p) => p.id === "cpu")?.message).toContain("1 usable by this process");
    expect((await probeHardware(fakeEnv({ usableCpus: () => 3 }))).cpu).toMatchObject({
      logical: 3,
      physical: 2,
    });
  });
});

describe("probeHardware with the llama-server that will run (docs/plan.md, Which GPUs)", () => {
  const BINARY = "/opt/app/llama-server";
  const smi = {
    kind: "exit",
    code: 0,
    stdout: "0, NVIDIA GeForce RTX 4090, 24564, 23000, 550, 8.9\n",
    stderr: "",
  } as const;
  const listing = (lines: string) =>
    ({ kind: "exit", code: 0, stdout: `Available devices:\n${lines}\n`, stderr: "" }) as const;

  test("--list-devices starts only once nvidia-smi has read free memory: its CUDA context holds VRAM", async () => {
    const asked: string[] = [];
    let answerSmi: (r: RunResult) => void = () => {};
    const probing = probeHardware(
      fakeEnv({
        run: (cmd) => {
          asked.push(cmd);
          if (cmd === "nvidia-smi") return new Promise<RunResult>((resolve) => (answerSmi = resolve));
          if (cmd === BINARY)
            return Promise.resolve(listing("  CUDA0: NVIDIA GeForce RTX 4090 (24564 MiB, 22000 MiB free)"));
          return Promise.resolve({ kind: "absent" } as const);
        },
      }),
      BINARY,
    );
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(asked).toContain("nvidia-smi");
    expect(asked).not.toContain(BINARY);
    answerSmi(smi);
    const h = await probing;
    expect(asked).toContain(BINARY);
    // The vendor tool's reading, taken before the listing's context existed, is the one planned.
    expect(h.gpus).toEqual([expect.objectContaining({ device: "CUDA0", free_bytes: 23000 * 2 ** 20 })]);
  });

  test("it is asked --list-devices, and a Vulkan build's AMD card no vendor tool saw is planned", async () => {
    const asked: string[][] = [];
    const h = await probeHardware(
      fakeEnv({
        run: async (cmd, args) => {
          asked.push([cmd, ...args]);
          return cmd === BINARY
            ? listing("  Vulkan0: AMD Radeon RX 7800 XT (RADV NAVI32) (16368 MiB, 15000 MiB free)")
            : { kind: "absent" };
        },
      }),
      BINARY,
    );
    expect(asked).toContainEqual([BINARY, "--list-devices"]);
    expect(h.gpus).toEqual([
      expect.objectContaining({
        index: 0,
        vendor: "amd",
        backend: "vulkan",
        device: "Vulkan0",
        unified: false,
      }),
    ]);
    expect(h.probes.find((p) => p.id === "llama-server")).toMatchObject({ status: "ok" });
    expect(h.probes.find((p) => p.id === "llama-server")!.message).toContain("Vulkan0");
  });

  test("a CPU build beside an NVIDIA GPU: no GPU planned, and why", async () => {
    const h = await probeHardware(
      fakeEnv({ tools: { "nvidia-smi": smi, [BINARY]: listing("  (none)") } }),
      BINARY,
    );
    expect(h.gpus).toEqual([]);
    expect(h.gpus_unused).toEqual([expect.stringContaining("NVIDIA GeForce RTX 4090 is not used")]);
  });

  test("a CUDA build: nvidia-smi's GPU, with llama-server's name for it", async () => {
    const h = await probeHardware(
      fakeEnv({
        tools: {
          "nvidia-smi": smi,
          [BINARY]: listing("  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)"),
        },
      }),
      BINARY,
    );
    expect(h.gpus).toEqual([expect.objectContaining({ backend: "cuda", device: "CUDA0", driver: "550" })]);
    // nvidia-smi's figures are the ones kept.
    expect(h.gpus[0]!.free_bytes).toBe(23000 * 2 ** 20);
    expect(h.gpus_unused).toBeUndefined();
  });

  test("a binary that hangs, fails or prints no list: the vendor tools' GPUs, and the probe says so", async () => {
    for (const answer of [
      { kind: "timeout" },
      { kind: "exit", code: 1, stdout: "", stderr: "error: invalid argument: --list-devices" },
      { kind: "exit", code: 0, stdout: "something else\n", stderr: "" },
    ] as RunResult[]) {
      const h = await probeHardware(fakeEnv({ tools: { "nvidia-smi": smi, [BINARY]: answer } }), BINARY);
      expect(h.gpus).toEqual([expect.objectContaining({ name: "NVIDIA GeForce RTX 4090", backend: "cuda" })]);
      expect(h.gpus[0]!.device).toBeUndefined();
      const report = h.probes.find((p) => p.id === "llama-server")!;
      expect(report.status).not.toBe("ok");
      expect(report.message).toContain("the vendor tools' GPUs are planned");
      // It was given 5 s, not the vendor tools' 2 s: the report says how long it was waited for.
      if (answer.kind === "timeout")
        expect(report.message).toStartWith("llama-server --list-devices did not answer within 5000 ms");
    }
  });

  test("without a binary nothing is asked of one", async () => {
    const h = await probeHardware(fakeEnv({ tools: { "nvidia-smi": smi } }));
    expect(h.probes.map((p) => p.id)).not.toContain("llama-server");
    expect(h.gpus).toHaveLength(1);
  });
});

describe("runWithTimeout (real processes)", () => {
  test("kills a command that hangs and says timeout", async () => {
    using dir = tmpdir();
    const script = join(dir.path, "hang.sh");
    writeFileSync(script, "#!/bin/sh\nsleep 30\n");
    chmodSync(script, 0o755);
    const r = await runWithTimeout(script, [], 300);
    expect(r.kind).toBe("timeout");
  });
  test("captures output, and a missing command is absent", async () => {
    using dir = tmpdir();
    const script = join(dir.path, "ok.sh");
    writeFileSync(script, "#!/bin/sh\necho out; echo err >&2; exit 3\n");
    chmodSync(script, 0o755);
    expect(await runWithTimeout(script, [], 5000)).toEqual({
      kind: "exit",
      code: 3,
      stdout: "out\n",
      stderr: "err\n",
    });
    expect((await runWithTimeout("definitely-not-a-command-xyz", [], 1000)).kind).toBe("absent");
  });
});
