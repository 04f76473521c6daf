import type { Handle, Kernel32 } from "../../../src/platform/windows/kernel32.ts";

/**
 * A kernel32 that behaves as Microsoft documents it, over a table of made-up processes, so the
 * readings' call sequences (open, query, close; the sizing call first) run on any OS.
 */
export interface FakeProcess {
  workingSet: bigint;
  created: bigint;
  exe: string;
  exited?: boolean;
  /** OpenProcess fails with ERROR_ACCESS_DENIED (another user's process). */
  denied?: boolean;
}

export function fakeKernel32(
  processes: Record<number, FakeProcess>,
  machine: { cores?: Uint8Array; total?: bigint; available?: bigint; fail?: Set<string> } = {},
) {
  const open = new Map<number, number>();
  let next = 0x40;
  let lastError = 0;
  const calls: string[] = [];
  /** Each job made: its LimitFlags as set, and the pids assigned to it. */
  const jobs = new Map<number, { flags: number | null; pids: number[] }>();
  const proc = (h: Handle) => processes[open.get(h as unknown as number) ?? -1];
  const fails = (name: string) => machine.fail?.has(name) ?? false;
  const k: Kernel32 = {
    OpenProcess(_access, _inherit, pid) {
      calls.push("OpenProcess");
      const p = processes[pid];
      if (!p || fails("OpenProcess")) {
        lastError = 87;
        return null;
      }
      if (p.denied) {
        lastError = 5;
        return null;
      }
      const h = next++;
      open.set(h, pid);
      return h as unknown as Handle;
    },
    CloseHandle(h) {
      calls.push("CloseHandle");
      return open.delete(h as unknown as number) || jobs.delete(h as unknown as number) ? 1 : 0;
    },
    GetLastError: () => lastError,
    K32GetProcessMemoryInfo(h, counters, size) {
      const p = proc(h);
      if (!p || size < 72 || fails("K32GetProcessMemoryInfo")) return 0;
      const v = new DataView(counters.buffer, counters.byteOffset);
      v.setUint32(4, 1234, true); // PageFaultCount
      v.setBigUint64(8, p.workingSet * 2n, true); // PeakWorkingSetSize
      v.setBigUint64(16, p.workingSet, true);
      return 1;
    },
    GetProcessTimes(h, creation) {
      const p = proc(h);
      if (!p || fails("GetProcessTimes")) return 0;
      new DataView(creation.buffer, creation.byteOffset).setBigUint64(0, p.created, true);
      return 1;
    },
    QueryFullProcessImageNameW(h, _flags, name, size) {
      const p = proc(h);
      if (!p || fails("QueryFullProcessImageNameW")) return 0;
      const bytes = Buffer.from(p.exe, "utf16le");
      new Uint8Array(name.buffer, name.byteOffset).set(bytes);
      size[0] = p.exe.length;
      return 1;
    },
    WaitForSingleObject(h) {
      const p = proc(h);
      return p?.exited ? 0 : 0x102;
    },
    GetLogicalProcessorInformationEx(relationship, buffer, length) {
      const records = machine.cores;
      if (relationship !== 0 || !records || fails("GetLogicalProcessorInformationEx")) return 0;
      if (!buffer || buffer.byteLength < records.byteLength) {
        length[0] = records.byteLength;
        lastError = 122; // ERROR_INSUFFICIENT_BUFFER
        return 0;
      }
      new Uint8Array(buffer.buffer, buffer.byteOffset).set(records);
      length[0] = records.byteLength;
      return 1;
    },
    GlobalMemoryStatusEx(status) {
      const v = new DataView(status.buffer, status.byteOffset);
      if (v.getUint32(0, true) !== 64 || fails("GlobalMemoryStatusEx")) return 0;
      v.setUint32(4, 42, true);
      v.setBigUint64(8, machine.total ?? 0n, true);
      v.setBigUint64(16, machine.available ?? 0n, true);
      return 1;
    },
    CreateJobObjectW() {
      calls.push("CreateJobObjectW");
      if (fails("CreateJobObjectW")) return null;
      const h = next++;
      jobs.set(h, { flags: null, pids: [] });
      return h as unknown as Handle;
    },
    SetInformationJobObject(job, infoClass, info, length) {
      calls.push("SetInformationJobObject");
      const j = jobs.get(job as unknown as number);
      if (!j || infoClass !== 9 || length !== 144 || fails("SetInformationJobObject")) return 0;
      j.flags = new DataView(info.buffer, info.byteOffset).getUint32(16, true);
      return 1;
    },
    AssignProcessToJobObject(job, process) {
      calls.push("AssignProcessToJobObject");
      const j = jobs.get(job as unknown as number);
      const pid = open.get(process as unknown as number);
      if (!j || pid === undefined || fails("AssignProcessToJobObject")) return 0;
      j.pids.push(pid);
      return 1;
    },
  };
  return { k, calls, jobs, openHandles: () => open.size };
}

/**
 * SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX records for cores, each with the given affinity masks
 * (one per processor group); `padding` grows a record as a later Windows may.
 */
export function coreRecords(cores: bigint[][], padding = 0): Uint8Array {
  const parts = cores.map((masks) => {
    const size = 32 + masks.length * 16 + padding;
    const rec = new Uint8Array(size);
    const v = new DataView(rec.buffer);
    v.setUint32(0, 0, true); // RelationProcessorCore
    v.setUint32(4, size, true);
    v.setUint8(8, masks.some((m) => m & (m - 1n)) ? 1 : 0); // LTP_PC_SMT
    v.setUint16(30, masks.length, true);
    masks.forEach((m, g) => {
      v.setBigUint64(32 + g * 16, m, true);
      v.setUint16(40 + g * 16, g, true);
    });
    return rec;
  });
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
