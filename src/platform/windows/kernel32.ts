import { dlopen, FFIType, type Pointer } from "bun:ffi";
import { logger } from "../../util/logger.ts";

/**
 * The few kernel32 calls the Windows readings make, through `bun:ffi` (Bun's own; no native
 * addon ships). Loaded on first use and only on Windows; a failed load is logged once and every
 * reading is then null, as a reading the OS refused is. The interface is what tests fake.
 */
export type Handle = Pointer;
type Buf = Uint8Array | Uint32Array;

export interface Kernel32 {
  OpenProcess(access: number, inheritHandle: number, pid: number): Handle | null;
  CloseHandle(handle: Handle): number;
  GetLastError(): number;
  /** psapi's GetProcessMemoryInfo under its kernel32 name (PSAPI_VERSION 2, Windows 7+). */
  K32GetProcessMemoryInfo(process: Handle, counters: Buf, size: number): number;
  GetProcessTimes(process: Handle, creation: Buf, exit: Buf, kernel: Buf, user: Buf): number;
  QueryFullProcessImageNameW(process: Handle, flags: number, name: Buf, size: Uint32Array): number;
  WaitForSingleObject(handle: Handle, milliseconds: number): number;
  GetLogicalProcessorInformationEx(relationship: number, buffer: Buf | null, length: Uint32Array): number;
  GlobalMemoryStatusEx(status: Buf): number;
  /** Null attributes (a handle no child inherits) and no name. */
  CreateJobObjectW(attributes: null, name: null): Handle | null;
  SetInformationJobObject(job: Handle, infoClass: number, info: Buf, length: number): number;
  AssignProcessToJobObject(job: Handle, process: Handle): number;
}

const { ptr, u32, i32 } = FFIType;
const SYMBOLS = {
  OpenProcess: { args: [u32, i32, u32], returns: ptr },
  CloseHandle: { args: [ptr], returns: i32 },
  GetLastError: { args: [], returns: u32 },
  K32GetProcessMemoryInfo: { args: [ptr, ptr, u32], returns: i32 },
  GetProcessTimes: { args: [ptr, ptr, ptr, ptr, ptr], returns: i32 },
  QueryFullProcessImageNameW: { args: [ptr, u32, ptr, ptr], returns: i32 },
  WaitForSingleObject: { args: [ptr, u32], returns: u32 },
  GetLogicalProcessorInformationEx: { args: [i32, ptr, ptr], returns: i32 },
  GlobalMemoryStatusEx: { args: [ptr], returns: i32 },
  CreateJobObjectW: { args: [ptr, ptr], returns: ptr },
  SetInformationJobObject: { args: [ptr, i32, ptr, u32], returns: i32 },
  AssignProcessToJobObject: { args: [ptr, ptr], returns: i32 },
} as const;

let loaded: Kernel32 | null | undefined;

/** The binding, or null off Windows or when it cannot be loaded. */
export function kernel32(): Kernel32 | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform !== "win32") return loaded;
  try {
    loaded = dlopen("kernel32.dll", SYMBOLS).symbols as unknown as Kernel32;
  } catch (err) {
    logger.warn(`kernel32.dll could not be loaded through bun:ffi: ${(err as Error).message}`);
  }
  return loaded;
}
