import type { GpuInfo, HardwareSnapshot } from "../protocol/plan.ts";

/**
 * What the machine offers, as one plain snapshot the planner takes (tests build these by hand),
 * and the pure parsers that turn probe output into it. Parsers reject garbage by returning
 * null rather than guessing.
 */

/** The snapshot's types are inferred from its schema: the snapshot is part of the plan report. */
export type { GpuInfo, GpuVendor, HardwareSnapshot, ProbeReport, ProbeStatus } from "../protocol/plan.ts";

const MIB = 1024 * 1024;

/**
 * More memory than any GPU has (a PiB), as rpc/wire.ts bounds a worker's: a tool that prints more
 * is broken, and the plan offloaded every layer to memory no device has.
 */
const MAX_GPU_BYTES = 2 ** 50;

/** `/proc/meminfo` → total and available bytes (MemAvailable counts reclaimable cache). */
export function parseMeminfo(text: string): { total_bytes: number; available_bytes: number | null } | null {
  const kb = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+)\\s*kB`, "m").exec(text);
    return m ? Number(m[1]) * 1024 : null;
  };
  const total = kb("MemTotal");
  if (!total) return null;
  return { total_bytes: total, available_bytes: kb("MemAvailable") ?? kb("MemFree") };
}

/** `/proc/cpuinfo` → model, physical cores (unique package/core pairs) and SIMD flags of note. */
export function parseCpuinfo(text: string): {
  model: string | null;
  physical: number | null;
  flags: string[];
} {
  const model = /^model name\s*:\s*(.+)$/m.exec(text)?.[1]?.trim() ?? null;
  const cores = new Set<string>();
  for (const block of text.split(/\n\s*\n/)) {
    const pkg = /^physical id\s*:\s*(\d+)/m.exec(block)?.[1];
    const core = /^core id\s*:\s*(\d+)/m.exec(block)?.[1];
    if (pkg !== undefined && core !== undefined) cores.add(`${pkg}:${core}`);
  }
  const flagLine = /^(flags|Features)\s*:\s*(.+)$/m.exec(text)?.[2] ?? "";
  const wanted = [
    "avx",
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "fma",
    "f16c",
    "amx_tile",
    "neon",
    "asimd",
    "sve",
  ];
  const have = new Set(flagLine.split(/\s+/));
  return { model, physical: cores.size > 0 ? cores.size : null, flags: wanted.filter((f) => have.has(f)) };
}

/**
 * `nvidia-smi --query-gpu=index,name,memory.total,memory.free,driver_version,compute_cap
 * --format=csv,noheader,nounits` → GPUs (memory in MiB). Null when any line is not that shape.
 * A GPU whose memory nvidia-smi cannot report (`[N/A]`: DGX Spark's GB10 and other parts that
 * share the system's memory, as NVIDIA documents) is a unified one, its memory `ram`'s: the plan
 * budgets it as it does Apple Silicon (docs/plan.md, "Budgets"). Without `ram`, 0 bytes.
 */
export function parseNvidiaSmi(text: string, ram: HardwareSnapshot["ram"] | null = null): GpuInfo[] | null {
  const lines = text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter(Boolean);
  if (lines.length === 0) return null;
  const gpus: GpuInfo[] = [];
  for (const line of lines) {
    const f = line.split(",").map((s) => s.trim());
    if (f.length < 5) return null;
    const [index, name, total, free, driver, cc] = f;
    if (!/^\d+$/.test(index!)) return null;
    const memory = gpuMemory(total!, free!, ram);
    if (!memory) return null;
    gpus.push({
      index: Number(index),
      vendor: "nvidia",
      name: name!,
      backend: "cuda",
      ...memory,
      driver: driver || null,
      compute_capability: cc && !notAvailable(cc) ? cc : null,
    });
  }
  return gpus;
}

/** nvidia-smi's words for a field this GPU does not report. */
const notAvailable = (field: string) => /^\[?(N\/A|Not Supported)\]?$/i.test(field);

function gpuMemory(
  total: string,
  free: string,
  ram: HardwareSnapshot["ram"] | null,
): Pick<GpuInfo, "total_bytes" | "free_bytes" | "unified"> | null {
  if (notAvailable(total)) {
    const t = ram?.total_bytes ?? 0;
    return { total_bytes: t, free_bytes: ram?.available_bytes ?? Math.floor(t / 2), unified: true };
  }
  const t = Number(total);
  // A total without a free figure: the whole of it, the budget's margin still taken.
  const fr = notAvailable(free) ? t : Number(free);
  if (!Number.isFinite(t) || !Number.isFinite(fr) || t <= 0 || t * MIB > MAX_GPU_BYTES) return null;
  return { total_bytes: t * MIB, free_bytes: Math.min(Math.max(fr, 0), t) * MIB, unified: false };
}

/** `rocm-smi --showmeminfo vram --showproductname --showdriverversion --json` → GPUs. */
export function parseRocmSmi(text: string): GpuInfo[] | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  if (!json || typeof json !== "object") return null;
  const root = json as Record<string, Record<string, string>>;
  const driver = root.system?.["Driver version"] ?? null;
  const gpus: GpuInfo[] = [];
  for (const [key, card] of Object.entries(root)) {
    const m = /^card(\d+)$/.exec(key);
    if (!m || !card || typeof card !== "object") continue;
    const total = Number(card["VRAM Total Memory (B)"]);
    const used = Number(card["VRAM Total Used Memory (B)"] ?? 0);
    if (!Number.isFinite(total) || total <= 0 || total > MAX_GPU_BYTES) continue;
    gpus.push({
      index: Number(m[1]),
      vendor: "amd",
      name: card["Card Series"] ?? card["Card series"] ?? card["Card SKU"] ?? `AMD GPU ${m[1]}`,
      backend: "rocm",
      total_bytes: total,
      free_bytes: Math.max(0, total - (Number.isFinite(used) ? used : 0)),
      unified: false,
      driver,
      compute_capability: card["GFX Version"] ?? null,
    });
  }
  return gpus.length > 0 ? gpus : null;
}

/**
 * The share of unified memory Metal lets the GPU wire: the explicit `iogpu.wired_limit_mb`
 * when set, else macOS's default (about 2/3 up to 36 GiB of RAM, 3/4 above).
 */
export function appleGpuBudget(totalRam: number, wiredLimitMb: number | null): number {
  if (wiredLimitMb && wiredLimitMb > 0) return Math.min(totalRam, wiredLimitMb * MIB);
  return Math.floor(totalRam * (totalRam <= 36 * 1024 * MIB ? 2 / 3 : 3 / 4));
}

/** Applies the config's budget overrides: RAM replaces the available figure, VRAM each GPU's free. */
export function applyOverrides(
  hw: HardwareSnapshot,
  overrides: { ram_bytes: number | null; vram_bytes: number | null },
): HardwareSnapshot {
  const ram =
    overrides.ram_bytes === null
      ? hw.ram
      : { total_bytes: overrides.ram_bytes, available_bytes: overrides.ram_bytes };
  const gpus =
    overrides.vram_bytes === null
      ? hw.gpus
      : hw.gpus.map((g) => ({ ...g, total_bytes: overrides.vram_bytes!, free_bytes: overrides.vram_bytes! }));
  return { ...hw, ram, gpus };
}
