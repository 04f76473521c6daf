import { type Kernel32, kernel32 } from "./kernel32.ts";
import {
  MEMORY_STATUS_SIZE,
  physicalMemory,
  processorCores,
  RELATION_PROCESSOR_CORE,
  sizedStruct,
} from "./layouts.ts";

/**
 * The machine as Windows reports it, for the hardware probe: physical cores
 * (GetLogicalProcessorInformationEx) and physical memory (GlobalMemoryStatusEx). Null when not
 * on Windows or when the call fails; the binding is a parameter so tests hand in a fake.
 */

/** Physical cores and the logical processors on them, across every processor group. */
export function windowsProcessorCores(
  k: Kernel32 | null = kernel32(),
): { cores: number; logical: number } | null {
  if (!k) return null;
  try {
    const length = new Uint32Array(1);
    // The first call only says how big the buffer must be (it fails with ERROR_INSUFFICIENT_BUFFER).
    k.GetLogicalProcessorInformationEx(RELATION_PROCESSOR_CORE, null, length);
    // Twice: the size could grow between the calls (a processor added while we ask).
    for (let attempt = 0; attempt < 2; attempt++) {
      const size = length[0] ?? 0;
      if (size === 0 || size > 16 * 1024 * 1024) return null;
      const buf = new Uint8Array(size);
      if (k.GetLogicalProcessorInformationEx(RELATION_PROCESSOR_CORE, buf, length))
        return processorCores(buf, Math.min(length[0] ?? 0, size));
      if ((length[0] ?? 0) <= size) return null;
    }
    return null;
  } catch {
    return null;
  }
}

/** Total and available physical memory; available counts the standby (cache) list. */
export function windowsPhysicalMemory(
  k: Kernel32 | null = kernel32(),
): { total_bytes: number; available_bytes: number } | null {
  if (!k) return null;
  try {
    const status = sizedStruct(MEMORY_STATUS_SIZE);
    return k.GlobalMemoryStatusEx(status) ? physicalMemory(status) : null;
  } catch {
    return null;
  }
}
