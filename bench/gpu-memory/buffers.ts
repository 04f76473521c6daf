/**
 * llama-server's start-up log lines that say what it allocated on each device
 * (`load_tensors: CUDA0 model buffer size = 4403.49 MiB`, `llama_kv_cache: CUDA0 KV buffer size`,
 * `sched_reserve: CUDA0 compute buffer size`, `llama_context: CUDA_Host output buffer size`…),
 * summed per device and kind, in bytes. Pure: the GPU memory check's comparison reads a log with it.
 */

export type BufferKind = "model" | "kv" | "compute" | "output";

export type DeviceBuffers = Record<BufferKind, number>;

const MIB = 1024 * 1024;
const LINE = /(\w+):\s+([A-Za-z][\w.]*)\s+(model|KV|compute|output) buffer size\s*=\s*([\d.]+) MiB/;

/**
 * Every buffer the log names, by llama-server's name for it (`CPU_Mapped`, `CPU_REPACK`, `CPU`,
 * `CUDA0`, `CUDA_Host`, `Vulkan0`…), in bytes; the vision projector's (libmtmd's
 * `reserve_compute_meta`, `clip_…`) under `clip <name>`.
 */
export function buffersOf(log: string): Record<string, DeviceBuffers> {
  const out: Record<string, DeviceBuffers> = {};
  for (const line of log.split("\n")) {
    const m = LINE.exec(line);
    if (!m) continue;
    const device = /clip|compute_meta/.test(m[1]!) ? `clip ${m[2]}` : m[2]!;
    const kind = (m[3] === "KV" ? "kv" : m[3]) as BufferKind;
    out[device] ??= { model: 0, kv: 0, compute: 0, output: 0 };
    out[device][kind] += Math.round(Number(m[4]) * MIB);
  }
  return out;
}

/** A GPU's buffers: the named devices' own (`CUDA0`), not their host staging (`CUDA_Host`). */
export function gpuBuffers(all: Record<string, DeviceBuffers>, device: string): DeviceBuffers {
  return all[device] ?? { model: 0, kv: 0, compute: 0, output: 0 };
}
