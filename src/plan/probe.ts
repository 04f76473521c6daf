import os from "node:os";
import { windowsPhysicalMemory, windowsProcessorCores } from "../platform/windows/system.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import { cgroupMemory } from "./cgroup-memory.ts";
import {
  appleGpuBudget,
  type GpuInfo,
  type HardwareSnapshot,
  type ProbeReport,
  parseCpuinfo,
  parseMeminfo,
  parseNvidiaSmi,
  parseRocmSmi,
} from "./hardware.ts";
import { kernelTextReader, procMountinfo } from "./kernel-text.ts";
import { type ListedDevice, parseListDevices, reconcileGpus } from "./listed-devices.ts";
import { type ListingHooks, REMEMBERED } from "./listing-memo.ts";
import { type RunResult, runWithTimeout } from "./run-probe.ts";

export { type RunResult, runWithTimeout };

/**
 * The hardware probes: each runs with a timeout and fails soft (a missing tool, a hung driver or
 * garbage output becomes a probe report, never an exception). Everything that touches the OS
 * comes through `ProbeEnv`, so tests hand in fakes.
 */

export const PROBE_TIMEOUT_MS = 2000;
/** `llama-server --list-devices` starts each GPU backend (a CUDA context per device): more time. */
export const LIST_DEVICES_TIMEOUT_MS = 5000;
/** Tests of the spawned core wait out a hung `--list-devices` sooner: a shorter wait only, else the 5 s. */
function listDevicesTimeoutMs(): number {
  const ms = Number(process.env.LOCAL_AI_TEST_LIST_DEVICES_TIMEOUT_MS);
  return ms > 0 && ms < LIST_DEVICES_TIMEOUT_MS ? ms : LIST_DEVICES_TIMEOUT_MS;
}
/** The id of the binary's own device list among the probe reports (doctor tells it apart). */
export const LIST_DEVICES_PROBE = "llama-server";

export interface ProbeEnv {
  platform: string;
  arch: string;
  run(cmd: string, args: string[], timeoutMs: number): Promise<RunResult>;
  readText(path: string): Promise<string | null>;
  cpus(): { model: string }[];
  /**
   * The CPUs this process may run on (its affinity: `taskset`, a container's cpuset), which
   * /proc/cpuinfo and `cpus()` do not see; absent, all of them.
   */
  usableCpus?(): number;
  totalmem(): number;
  freemem(): number;
  now(): number;
  /** Windows' own counts (kernel32); null where the OS refused them. */
  windows?: {
    processorCores(): { cores: number; logical: number } | null;
    physicalMemory(): { total_bytes: number; available_bytes: number } | null;
  };
}

export const realProbeEnv: ProbeEnv = {
  platform: process.platform,
  arch: process.arch,
  run: runWithTimeout,
  // The memory readings' kernel files at once, where the kernel makes them (kernel-text.ts).
  readText: kernelTextReader(procMountinfo),
  cpus: () => os.cpus(),
  usableCpus: () => os.availableParallelism(),
  totalmem: () => os.totalmem(),
  freemem: () => os.freemem(),
  now: () => performance.now(),
  windows: { processorCores: () => windowsProcessorCores(), physicalMemory: () => windowsPhysicalMemory() },
};

async function timed<T>(
  env: ProbeEnv,
  id: string,
  fn: () => Promise<{ value: T; report: Omit<ProbeReport, "id" | "ms"> }>,
): Promise<{ value: T | null; report: ProbeReport }> {
  const start = env.now();
  try {
    const { value, report } = await fn();
    return { value, report: { id, ...report, ms: Math.round(env.now() - start) } };
  } catch (err) {
    return {
      value: null,
      report: { id, status: "error", message: (err as Error).message, ms: Math.round(env.now() - start) },
    };
  }
}

/** `timeoutMs`: what the tool was given, which a timeout's message names. */
function describeRun(
  tool: string,
  r: RunResult,
  timeoutMs = PROBE_TIMEOUT_MS,
): Omit<ProbeReport, "id" | "ms"> {
  if (r.kind === "absent") return { status: "absent", message: `${tool} not found` };
  if (r.kind === "timeout")
    return { status: "timeout", message: `${tool} did not answer within ${timeoutMs} ms` };
  if (r.kind === "error") return { status: "error", message: `${tool} failed to start: ${r.message}` };
  const last = (r.stderr || r.stdout).trim().split("\n").slice(-1)[0] ?? "";
  // Cut between characters: half an emoji makes the host's line one a strict parser refuses.
  const tail = last.slice(0, wholeCharCut(last, 200));
  return { status: "error", message: `${tool} exited ${r.code}${tail ? `: ${tail}` : ""}` };
}

async function probeCpu(
  env: ProbeEnv,
): Promise<{ value: HardwareSnapshot["cpu"]; report: Omit<ProbeReport, "id" | "ms"> }> {
  const cpus = env.cpus();
  const logical = Math.max(1, cpus.length);
  let model = cpus[0]?.model?.trim() || null;
  let physical: number | null = null;
  let flags: string[] = [];
  if (env.platform === "linux") {
    const info = await env.readText("/proc/cpuinfo");
    if (info) {
      const parsed = parseCpuinfo(info);
      model = parsed.model ?? model;
      physical = parsed.physical;
      flags = parsed.flags;
    }
  } else if (env.platform === "darwin") {
    const r = await env.run("sysctl", ["-n", "hw.physicalcpu"], PROBE_TIMEOUT_MS);
    if (r.kind === "exit" && r.code === 0 && /^\d+$/.test(r.stdout.trim()))
      physical = Number(r.stdout.trim());
    if (env.arch === "arm64") flags = ["neon"];
  } else if (env.platform === "win32") {
    physical = env.windows?.processorCores()?.cores ?? null;
  }
  const found = `${logical} logical, ${physical ?? "?"} physical cores`;
  const usable = env.usableCpus?.() ?? logical;
  if (!(usable >= 1 && usable < logical))
    return { value: { model, logical, physical, flags }, report: { status: "ok", message: found } };
  // More threads than CPUs to run them spin at ggml's barriers: a 4-CPU cpuset on a 32-core
  // machine ran -t 32, several times slower than -t 4.
  return {
    value: { model, logical: usable, physical: physical === null ? null : Math.min(physical, usable), flags },
    report: { status: "ok", message: `${found}; ${usable} usable by this process (its CPU affinity)` },
  };
}

/** The machine's memory bounded by its control groups' (cgroup-memory.ts): a container's, a unit's. */
function withinCgroup(
  ram: HardwareSnapshot["ram"],
  group: { limit_bytes: number; available_bytes: number } | null,
): { value: HardwareSnapshot["ram"]; report: Omit<ProbeReport, "id" | "ms"> } {
  const meminfo = "from /proc/meminfo (MemAvailable)";
  if (!group || group.limit_bytes >= ram.total_bytes)
    return { value: ram, report: { status: "ok", message: meminfo } };
  const available = Math.min(ram.available_bytes ?? ram.total_bytes, group.available_bytes);
  return {
    value: { total_bytes: group.limit_bytes, available_bytes: available },
    report: {
      status: "ok",
      message: `${meminfo}, within this process's cgroup memory limit of ${group.limit_bytes} bytes`,
    },
  };
}

async function probeRam(
  env: ProbeEnv,
): Promise<{ value: HardwareSnapshot["ram"]; report: Omit<ProbeReport, "id" | "ms"> }> {
  if (env.platform === "linux") {
    const text = await env.readText("/proc/meminfo");
    const parsed = text ? parseMeminfo(text) : null;
    if (parsed) return withinCgroup(parsed, await cgroupMemory((path) => env.readText(path)));
  }
  const windows = env.platform === "win32" ? env.windows?.physicalMemory() : null;
  if (windows)
    return { value: windows, report: { status: "ok", message: "from GlobalMemoryStatusEx (available)" } };
  // Elsewhere free memory undercounts reclaimable cache; it is the cautious figure.
  return {
    value: { total_bytes: env.totalmem(), available_bytes: env.freemem() },
    report: { status: "ok", message: "from the OS totals (free memory, cautious)" },
  };
}

/** `ram`: the RAM reading, which a unified GPU's memory is (hardware.ts parseNvidiaSmi). */
async function probeNvidia(
  env: ProbeEnv,
  ram: Promise<HardwareSnapshot["ram"]>,
): Promise<{ value: GpuInfo[]; report: Omit<ProbeReport, "id" | "ms"> }> {
  const r = await env.run(
    "nvidia-smi",
    [
      "--query-gpu=index,name,memory.total,memory.free,driver_version,compute_cap",
      "--format=csv,noheader,nounits",
    ],
    PROBE_TIMEOUT_MS,
  );
  if (r.kind !== "exit" || r.code !== 0) return { value: [], report: describeRun("nvidia-smi", r) };
  const gpus = parseNvidiaSmi(r.stdout, await ram);
  if (!gpus) {
    return {
      value: [],
      report: {
        status: "error",
        message: `nvidia-smi printed output that is not a GPU list: ${r.stdout.slice(0, 80)}`,
      },
    };
  }
  const unified = gpus.filter((g) => g.unified).length;
  const shared =
    unified > 0 ? `; ${unified} with no memory of its own reported (unified: the system's RAM)` : "";
  return {
    value: gpus,
    report: {
      status: "ok",
      message: `${gpus.length} GPU(s), driver ${gpus[0]?.driver ?? "unknown"}${shared}`,
    },
  };
}

async function probeRocm(
  env: ProbeEnv,
): Promise<{ value: GpuInfo[]; report: Omit<ProbeReport, "id" | "ms"> }> {
  if (env.platform === "darwin") return { value: [], report: { status: "absent", message: "not on macOS" } };
  const r = await env.run(
    "rocm-smi",
    ["--showmeminfo", "vram", "--showproductname", "--showdriverversion", "--json"],
    PROBE_TIMEOUT_MS,
  );
  if (r.kind !== "exit" || r.code !== 0) return { value: [], report: describeRun("rocm-smi", r) };
  const gpus = parseRocmSmi(r.stdout);
  if (!gpus)
    return {
      value: [],
      report: { status: "error", message: "rocm-smi printed output that is not a GPU list" },
    };
  return { value: gpus, report: { status: "ok", message: `${gpus.length} AMD GPU(s)` } };
}

async function probeApple(
  env: ProbeEnv,
  totalRam: number,
): Promise<{ value: GpuInfo[]; report: Omit<ProbeReport, "id" | "ms"> }> {
  if (env.platform !== "darwin" || env.arch !== "arm64") {
    return { value: [], report: { status: "absent", message: "not Apple Silicon" } };
  }
  const r = await env.run("sysctl", ["-n", "iogpu.wired_limit_mb"], PROBE_TIMEOUT_MS);
  const limit =
    r.kind === "exit" && r.code === 0 && /^\d+$/.test(r.stdout.trim()) ? Number(r.stdout.trim()) : null;
  const budget = appleGpuBudget(totalRam, limit);
  const chip = env.cpus()[0]?.model?.trim() || "Apple Silicon";
  return {
    value: [
      {
        index: 0,
        vendor: "apple",
        name: `${chip} GPU`,
        backend: "metal",
        total_bytes: budget,
        free_bytes: budget,
        unified: true,
        driver: "Metal",
        compute_capability: null,
      },
    ],
    report: {
      status: "ok",
      message: `Metal, unified memory, GPU may use ${Math.round(budget / 2 ** 30)} GiB`,
    },
  };
}

/** The binary's own device list (listed-devices.ts); null value when it gave none. */
async function probeListed(
  env: ProbeEnv,
  binary: string,
  memo?: ListingHooks,
): Promise<{ value: ListedDevice[] | null; report: Omit<ProbeReport, "id" | "ms"> }> {
  const recall = memo ? await memo.recall(binary) : null;
  // A CPU build's `(none)` remembered (listing-memo.ts): its process start spared a cold chat.
  if (recall?.hit) return { value: [], report: { status: "ok", message: REMEMBERED } };
  const asked = await askListed(env, binary);
  if (memo && recall) memo.learned(binary, recall, asked.value);
  return asked;
}

async function askListed(
  env: ProbeEnv,
  binary: string,
): Promise<{ value: ListedDevice[] | null; report: Omit<ProbeReport, "id" | "ms"> }> {
  const timeoutMs = listDevicesTimeoutMs();
  const r = await env.run(binary, ["--list-devices"], timeoutMs);
  if (r.kind !== "exit" || r.code !== 0) {
    const failed = describeRun("llama-server --list-devices", r, timeoutMs);
    return {
      value: null,
      report: { ...failed, message: `${failed.message}; the vendor tools' GPUs are planned` },
    };
  }
  const listed = parseListDevices(r.stdout);
  if (listed) return { value: listed, report: { status: "ok", message: "" } };
  return {
    value: null,
    report: {
      status: "error",
      message: "llama-server --list-devices printed no device list; the vendor tools' GPUs are planned",
    },
  };
}

/**
 * Runs every probe at once but the binary's device list, which follows the memory readings;
 * resolves within about PROBE_TIMEOUT_MS whatever the tools do (with the binary, that and
 * LIST_DEVICES_TIMEOUT_MS). `binary`: the llama-server that will run, asked which devices it can
 * use (docs/plan.md "Which GPUs"); absent, the vendor tools alone decide. `memo`: its `(none)`
 * remembered across core starts (listing-memo.ts); absent, always asked.
 */
export async function probeHardware(
  env: ProbeEnv = realProbeEnv,
  binary?: string,
  memo?: ListingHooks,
): Promise<HardwareSnapshot> {
  const ramProbe = timed(env, "ram", () => probeRam(env));
  const ramReading = ramProbe.then(
    (r) => r.value ?? { total_bytes: env.totalmem(), available_bytes: env.freemem() },
  );
  const nvidiaProbe = timed(env, "nvidia-smi", () => probeNvidia(env, ramReading));
  const rocmProbe = timed(env, "rocm-smi", () => probeRocm(env));
  // Once the vendor tools have read free memory: the listing's CUDA context holds VRAM (and its
  // libraries RAM) that they would read as used, planning smaller than the machine allows.
  const listedProbe =
    binary === undefined
      ? null
      : Promise.all([ramProbe, nvidiaProbe, rocmProbe]).then(() =>
          timed(env, LIST_DEVICES_PROBE, () => probeListed(env, binary, memo)),
        );
  const [cpu, ram, nvidia, rocm, listed] = await Promise.all([
    timed(env, "cpu", () => probeCpu(env)),
    ramProbe,
    nvidiaProbe,
    rocmProbe,
    listedProbe,
  ]);
  const ramValue = await ramReading;
  const apple = await timed(env, "metal", () => probeApple(env, ramValue.total_bytes));
  const found = [...(nvidia.value ?? []), ...(rocm.value ?? []), ...(apple.value ?? [])].map((g, i) => ({
    ...g,
    index: i,
  }));
  const probes = [cpu.report, ram.report, nvidia.report, rocm.report, apple.report];
  const snapshot: HardwareSnapshot = {
    os: env.platform,
    arch: env.arch,
    cpu: cpu.value ?? { model: null, logical: Math.max(1, env.cpus().length), physical: null, flags: [] },
    ram: ramValue,
    gpus: found,
    probes,
  };
  if (!listed) return snapshot;
  if (!listed.value) return { ...snapshot, probes: [...probes, listed.report] };
  const { gpus, unused, left, message } = reconcileGpus(found, listed.value, ramValue, binary!);
  return {
    ...snapshot,
    gpus,
    ...(unused.length > 0 ? { gpus_unused: unused } : {}),
    ...(left.length > 0 ? { devices_left_out: left } : {}),
    probes: [
      ...probes,
      { ...listed.report, message: listed.report.message ? `${message}; ${listed.report.message}` : message },
    ],
  };
}
