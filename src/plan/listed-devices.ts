import type { GpuBackend, GpuInfo, GpuVendor, HardwareSnapshot } from "../protocol/plan.ts";

/**
 * What llama-server itself says it can run on (`llama-server --list-devices`, common/arg.cpp:
 * `Available devices:` then one `  <name>: <description> (<total> MiB, <free> MiB free)` line per
 * device, or `  (none)` for a build with no GPU backend: test/fixtures/llama-server/transcripts/84),
 * and how that meets what the vendor tools found (docs/plan.md, "Which GPUs"). The vendor tools
 * see the machine; the listing sees the build: a Vulkan build on an AMD card without rocm-smi, or a
 * CPU build beside an NVIDIA GPU, is only told apart by asking the binary.
 */

const MIB = 1024 * 1024;

export interface ListedDevice {
  /** llama-server's name for it: `CUDA0`, `Vulkan1`, `MTL0`, `ROCm0`, `SYCL0`… */
  name: string;
  description: string;
  total_bytes: number;
  free_bytes: number;
}

/** The listing's devices ([] for `(none)`); null when the text is not a listing (an older build). */
export function parseListDevices(stdout: string): ListedDevice[] | null {
  const lines = stdout.split(/\r?\n/);
  const start = lines.findIndex((l) => l.trim() === "Available devices:");
  if (start < 0) return null;
  const devices: ListedDevice[] = [];
  let none = false;
  for (const line of lines.slice(start + 1)) {
    if (line.trim() === "(none)") none = true;
    // The description may hold parentheses of its own (`AMD Radeon RX 7900 XTX (RADV NAVI31)`).
    const m = /^\s+([^\s:]+): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$/.exec(line);
    if (!m) continue;
    const total = Number(m[3]) * MIB;
    devices.push({
      name: m[1]!,
      description: m[2]!.trim(),
      total_bytes: total,
      free_bytes: Math.min(Number(m[4]) * MIB, total),
    });
  }
  return devices.length > 0 || none ? devices : null;
}

const BACKENDS: [RegExp, GpuBackend][] = [
  [/^CUDA\d/, "cuda"],
  [/^ROCm\d/, "rocm"],
  [/^MTL\d/, "metal"],
  [/^Vulkan\d/, "vulkan"],
  [/^SYCL\d/, "sycl"],
  [/OpenCL/i, "opencl"],
  [/^MUSA\d/, "musa"],
  [/^CANN\d/, "cann"],
];

export function backendOfDevice(name: string): GpuBackend {
  return BACKENDS.find(([re]) => re.test(name))?.[1] ?? "other";
}

/** The vendor: the backend's where it has one, else the description's words. */
export function vendorOfDevice(device: Pick<ListedDevice, "name" | "description">): GpuVendor {
  const backend = backendOfDevice(device.name);
  if (backend === "cuda") return "nvidia";
  if (backend === "rocm") return "amd";
  if (backend === "metal") return "apple";
  const d = device.description;
  if (/nvidia|geforce|quadro|tesla/i.test(d)) return "nvidia";
  if (/\bamd\b|radeon|instinct/i.test(d)) return "amd";
  if (/intel|\barc\b|iris|\buhd\b/i.test(d)) return "intel";
  if (/apple/i.test(d)) return "apple";
  return "other";
}

/** A renderer on the CPU that a Vulkan loader may list: no GPU to offload to. */
const SOFTWARE = /llvmpipe|lavapipe|swiftshader/i;

/**
 * Whether a device no vendor tool vouches for shares the system's RAM, which the listing does not
 * say (ggml-vulkan sums all of an integrated GPU's heaps, RAM included): by its name, as integrated
 * parts are named (Intel's but the Arc A/B cards and data-centre parts; AMD's `Radeon(TM)
 * Graphics`, `780M`, `8060S`, Vega, but no `RX` card; Apple's), else by a memory that is nearly all
 * the RAM. A discrete GPU taken for unified is under-used; the reverse would plan the RAM twice.
 */
export function sharesRam(device: ListedDevice, ram: HardwareSnapshot["ram"]): boolean {
  const d = device.description;
  const vendor = vendorOfDevice(device);
  if (vendor === "apple") return true;
  if (vendor === "intel") return !/arc.*\b[ab]\d{3}\b|data center|\bmax\b|\bflex\b/i.test(d);
  if (vendor === "amd" && !/\bRX\b|instinct|\bpro\b/i.test(d))
    return /radeon(\(tm\))? graphics|radeon(\(tm\))? \d{3,4}[ms]\b|vega \d+/i.test(d);
  return device.total_bytes >= NEARLY_ALL * ram.total_bytes;
}

/** A device with this share of the RAM or more can only be drawing on it. */
const NEARLY_ALL = 0.9;

export interface Reconciled {
  gpus: GpuInfo[];
  /** Why each GPU a vendor tool found is not planned, for the plan's warnings. */
  unused: string[];
  /** Listed devices the plan leaves out (no vendor tool vouches for them, one vouches for another). */
  left: string[];
  /** The probe report's line. */
  message: string;
}

/**
 * The GPUs the plan may use: llama-server's devices, each with what a vendor tool says of it where
 * one does (driver, compute capability, its memory figures, a GB10's unified memory), in
 * llama-server's order. Devices no vendor tool vouches for are planned only when none is (an
 * integrated GPU, which llama-server itself uses only when there is no other, or a card whose
 * vendor tool is not installed).
 */
export function reconcileGpus(
  found: readonly GpuInfo[],
  listed: readonly ListedDevice[],
  ram: HardwareSnapshot["ram"],
  binary: string,
): Reconciled {
  const devices = listed.filter((d) => !SOFTWARE.test(d.description));
  const pairs = pairDevices(found, devices);
  const confirmed = devices.filter((d) => pairs.has(d));
  const chosen = confirmed.length > 0 ? confirmed : devices;
  const gpus = chosen.map((d, index): GpuInfo => {
    const vouched = pairs.get(d);
    if (vouched) return { ...vouched, index, backend: backendOfDevice(d.name), device: d.name };
    return {
      index,
      vendor: vendorOfDevice(d),
      name: d.description,
      backend: backendOfDevice(d.name),
      total_bytes: d.total_bytes,
      free_bytes: d.free_bytes,
      unified: sharesRam(d, ram),
      driver: null,
      compute_capability: null,
      device: d.name,
    };
  });
  const paired = new Set(pairs.values());
  const unused = found
    .filter((g) => !paired.has(g))
    .map((g) =>
      devices.length === 0
        ? `${g.name} is not used: llama-server (${binary}) lists no GPU device, a build without a GPU backend; a ${g.vendor === "nvidia" ? "CUDA or Vulkan" : "GPU"} build of llama-server would use it`
        : `${g.name} is not used: it is not among llama-server's devices (${devices.map((d) => d.name).join(", ")})`,
    );
  const left = devices.filter((d) => !chosen.includes(d));
  const names = gpus.map((g) => `${g.device} ${g.name}${g.unified ? " (unified)" : ""}`);
  const message =
    (gpus.length > 0 ? `llama-server's devices: ${names.join(", ")}` : "llama-server lists no GPU device") +
    (left.length > 0
      ? `; left to llama-server, no vendor tool vouches for ${left.map((d) => `${d.name} ${d.description}`).join(", ")}`
      : "");
  return { gpus, unused, left: left.map((d) => d.name), message };
}

/** Each listed device's vendor-tool GPU: same vendor, the same name first, then in order. */
function pairDevices(
  found: readonly GpuInfo[],
  devices: readonly ListedDevice[],
): Map<ListedDevice, GpuInfo> {
  const pairs = new Map<ListedDevice, GpuInfo>();
  const taken = new Set<GpuInfo>();
  const same = (a: string, b: string) => a.trim().toLowerCase() === b.trim().toLowerCase();
  const pass = (match: (d: ListedDevice, g: GpuInfo) => boolean) => {
    for (const d of devices) {
      if (pairs.has(d)) continue;
      const g = found.find((g) => !taken.has(g) && g.vendor === vendorOfDevice(d) && match(d, g));
      if (g) {
        pairs.set(d, g);
        taken.add(g);
      }
    }
  };
  pass((d, g) => same(d.description, g.name));
  pass(() => true);
  return pairs;
}
