import { type Handle, type Kernel32, kernel32 } from "./kernel32.ts";
import {
  FILETIME_SIZE,
  fileTime,
  MEMORY_COUNTERS_SIZE,
  sizedStruct,
  utf16,
  workingSetBytes,
} from "./layouts.ts";

/**
 * Readings of another process on Windows, by pid, through documented kernel32 calls: no
 * PowerShell or tasklist per call (each costs a process start on a path that must answer at
 * once). Each reading is null when it cannot be taken (not Windows, no such process, access
 * refused, a call that failed); the binding is a parameter so tests hand in a fake.
 */

// Process Security and Access Rights: the least a query needs, granted even for many
// processes of other users; SYNCHRONIZE lets us wait on (here: poll) the process handle.
const PROCESS_QUERY_LIMITED_INFORMATION = 0x1000;
const SYNCHRONIZE = 0x0010_0000;
const WAIT_OBJECT_0 = 0;
const WAIT_TIMEOUT = 0x102;
const ERROR_ACCESS_DENIED = 5;
const ERROR_INVALID_PARAMETER = 87;
/** Long paths reach 32 767 UTF-16 units (Naming Files, Paths, and Namespaces). */
const MAX_PATH_CHARS = 32_768;

function openProcess<T>(k: Kernel32 | null, pid: number, access: number, read: (h: Handle) => T | null) {
  if (!k || !Number.isInteger(pid) || pid <= 0 || pid > 0xffff_ffff) return null;
  const handle = k.OpenProcess(access, 0, pid);
  if (!handle) return null;
  try {
    return read(handle);
  } catch {
    return null;
  } finally {
    k.CloseHandle(handle);
  }
}

/** Resident memory: the working set (GetProcessMemoryInfo), in bytes. */
export function windowsResidentBytes(pid: number, k: Kernel32 | null = kernel32()): number | null {
  return openProcess(k, pid, PROCESS_QUERY_LIMITED_INFORMATION, (h) => {
    const counters = sizedStruct(MEMORY_COUNTERS_SIZE);
    if (!k!.K32GetProcessMemoryInfo(h, counters, MEMORY_COUNTERS_SIZE)) return null;
    return workingSetBytes(counters);
  });
}

/**
 * What tells this process from a later one given the same pid: its creation time (a FILETIME,
 * as a decimal string; fixed for the process's life, and a pid is not reused while a handle to
 * the process is open) and its executable's full path. Windows documents no call that gives
 * another process's command line, so `cmdline` is that path too.
 */
export function windowsProcessIdentity(
  pid: number,
  k: Kernel32 | null = kernel32(),
): { start_time: string; cmdline: string; exe?: string } | null {
  return openProcess(k, pid, PROCESS_QUERY_LIMITED_INFORMATION, (h) => {
    const times = [0, 1, 2, 3].map(() => new Uint8Array(FILETIME_SIZE)) as [
      Uint8Array,
      Uint8Array,
      Uint8Array,
      Uint8Array,
    ];
    if (!k!.GetProcessTimes(h, ...times)) return null;
    const start = fileTime(times[0]);
    if (start === null) return null;
    const exe = imagePath(k!, h);
    return exe === null ? { start_time: start, cmdline: "" } : { start_time: start, cmdline: exe, exe };
  });
}

function imagePath(k: Kernel32, h: Handle): string | null {
  const name = new Uint8Array(MAX_PATH_CHARS * 2);
  const size = new Uint32Array([MAX_PATH_CHARS]);
  // Flags 0: the Win32 path form (C:\…), not the native \Device\… form.
  if (!k.QueryFullProcessImageNameW(h, 0, name, size)) return null;
  return utf16(name, size[0] ?? 0);
}

/**
 * Whether a process with this pid is running: its handle not yet signalled. An exited process
 * whose handle someone still holds is dead (as a zombie is on Unix). A pid that exists but
 * refuses us is alive (EPERM's meaning for kill(0)). Null when it cannot be told.
 */
export function windowsPidAlive(pid: number, k: Kernel32 | null = kernel32()): boolean | null {
  if (!k || !Number.isInteger(pid) || pid <= 0 || pid > 0xffff_ffff) return null;
  const handle = k.OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION | SYNCHRONIZE, 0, pid);
  if (!handle) {
    const error = k.GetLastError();
    if (error === ERROR_ACCESS_DENIED) return true;
    if (error === ERROR_INVALID_PARAMETER) return false; // OpenProcess's answer for no such pid
    return null;
  }
  try {
    const state = k.WaitForSingleObject(handle, 0);
    if (state === WAIT_TIMEOUT) return true;
    if (state === WAIT_OBJECT_0) return false;
    return null;
  } finally {
    k.CloseHandle(handle);
  }
}
