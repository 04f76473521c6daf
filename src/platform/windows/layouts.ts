/**
 * The Win32 structures the Windows readings fill, and pure parsers of their bytes (x64 layouts,
 * little-endian, as Microsoft's headers define them), so the parsing is tested on any OS with
 * hand-built buffers. A parser returns null for a buffer that is not the structure it expects.
 */

/** PROCESS_MEMORY_COUNTERS (psapi.h): cb, PageFaultCount (DWORDs), then eight SIZE_Ts. */
export const MEMORY_COUNTERS_SIZE = 72;
const WORKING_SET_OFFSET = 16; // after cb, PageFaultCount and PeakWorkingSetSize

/** MEMORYSTATUSEX (sysinfoapi.h): dwLength, dwMemoryLoad (DWORDs), then seven DWORDLONGs. */
export const MEMORY_STATUS_SIZE = 64;
const TOTAL_PHYS_OFFSET = 8;
const AVAIL_PHYS_OFFSET = 16;

/** LOGICAL_PROCESSOR_RELATIONSHIP: RelationProcessorCore asks for one record per physical core. */
export const RELATION_PROCESSOR_CORE = 0;
// SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX: Relationship, Size (DWORDs), then the union; for a
// core that is PROCESSOR_RELATIONSHIP: Flags, EfficiencyClass, Reserved[20], GroupCount (WORD)
// at 30, then GroupCount GROUP_AFFINITY entries of 16 bytes from 32 (a 64-bit mask first).
const RECORD_HEADER_SIZE = 8;
const GROUP_COUNT_OFFSET = 8 + 22;
const GROUP_MASKS_OFFSET = 8 + 24;
const GROUP_AFFINITY_SIZE = 16;

/** A FILETIME: 100-nanosecond intervals since 1601-01-01 UTC, as two DWORDs (low first). */
export const FILETIME_SIZE = 8;

function view(buf: Uint8Array): DataView {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** A zeroed buffer of `size` bytes whose first DWORD says its size, as these calls require. */
export function sizedStruct(size: number): Uint8Array {
  const buf = new Uint8Array(size);
  view(buf).setUint32(0, size, true);
  return buf;
}

/** WorkingSetSize of a PROCESS_MEMORY_COUNTERS: the process's resident memory, in bytes. */
export function workingSetBytes(buf: Uint8Array): number | null {
  if (buf.byteLength < MEMORY_COUNTERS_SIZE) return null;
  const bytes = Number(view(buf).getBigUint64(WORKING_SET_OFFSET, true));
  return bytes > 0 ? bytes : null;
}

/** Total and available physical memory of a MEMORYSTATUSEX. */
export function physicalMemory(buf: Uint8Array): { total_bytes: number; available_bytes: number } | null {
  if (buf.byteLength < MEMORY_STATUS_SIZE) return null;
  const v = view(buf);
  const total = Number(v.getBigUint64(TOTAL_PHYS_OFFSET, true));
  const available = Number(v.getBigUint64(AVAIL_PHYS_OFFSET, true));
  if (total <= 0 || available > total) return null;
  return { total_bytes: total, available_bytes: available };
}

/**
 * Physical cores and the logical processors on them, from the records that
 * GetLogicalProcessorInformationEx(RelationProcessorCore) wrote into the first `length` bytes.
 * Each record says its own size (Microsoft: walk by Size, the layout may grow); a size that
 * cannot be a record, or runs past the end, makes the whole buffer untrusted.
 */
export function processorCores(buf: Uint8Array, length: number): { cores: number; logical: number } | null {
  if (length <= 0 || length > buf.byteLength) return null;
  const v = view(buf);
  let cores = 0;
  let logical = 0;
  for (let at = 0; at < length; ) {
    if (at + RECORD_HEADER_SIZE > length) return null;
    const relationship = v.getUint32(at, true);
    const size = v.getUint32(at + 4, true);
    if (size < RECORD_HEADER_SIZE || at + size > length) return null;
    if (relationship === RELATION_PROCESSOR_CORE) {
      cores++;
      logical += coreThreads(v, at, size);
    }
    at += size;
  }
  return cores > 0 ? { cores, logical: Math.max(logical, cores) } : null;
}

/** The logical processors of one core record: the set bits of its group masks. */
function coreThreads(v: DataView, at: number, size: number): number {
  if (size < GROUP_MASKS_OFFSET) return 0;
  const groups = v.getUint16(at + GROUP_COUNT_OFFSET, true);
  let threads = 0;
  for (let g = 0; g < groups; g++) {
    const mask = at + GROUP_MASKS_OFFSET + g * GROUP_AFFINITY_SIZE;
    if (mask + 8 > at + size) break;
    threads += bitCount(v.getBigUint64(mask, true));
  }
  return threads;
}

function bitCount(mask: bigint): number {
  let n = 0;
  for (let m = mask; m > 0n; m >>= 1n) n += Number(m & 1n);
  return n;
}

/** A FILETIME as a decimal string (the form pid records keep); null for a zero time. */
export function fileTime(buf: Uint8Array): string | null {
  if (buf.byteLength < FILETIME_SIZE) return null;
  const ticks = view(buf).getBigUint64(0, true);
  return ticks > 0n ? ticks.toString() : null;
}

/** The first `chars` UTF-16 code units of `buf` (QueryFullProcessImageNameW's path). */
export function utf16(buf: Uint8Array, chars: number): string | null {
  if (chars <= 0 || chars * 2 > buf.byteLength) return null;
  return Buffer.from(buf.buffer, buf.byteOffset, chars * 2).toString("utf16le");
}
