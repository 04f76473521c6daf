import { readFileSync } from "node:fs";
import { windowsResidentBytes } from "../platform/windows/process.ts";

/**
 * Memory and read counters of a process, as the OS shows them without asking the process:
 * Linux /proc, and Windows' resident memory (its working set, through kernel32). Elsewhere
 * every reading is null (a `ps` or PowerShell call per status would cost milliseconds on a path
 * that must answer at once), and callers omit the figure.
 */

/** Resident memory (VmRSS of /proc/<pid>/status; Windows: the working set) in bytes, or null. */
export function residentBytes(pid: number): number | null {
  if (process.platform === "win32") return windowsResidentBytes(pid);
  if (process.platform !== "linux") return null;
  try {
    const kb = readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m)?.[1];
    return kb === undefined ? null : Number(kb) * 1024;
  } catch {
    return null;
  }
}

/**
 * Whether a process has given its memory back: on Linux its /proc/<pid>/status has no `VmRSS`
 * (an exiting process loses it when the kernel releases its address space, before its files
 * are closed). False where it cannot be told: callers then wait for the exit itself.
 */
export function memoryReleased(pid: number): boolean {
  if (process.platform !== "linux") return false;
  try {
    return addressSpaceGone(readFileSync(`/proc/${pid}/status`, "utf8"));
  } catch {
    // Gone (its exit is reported at once then) or unreadable.
    return false;
  }
}

/** A /proc/<pid>/status text without the address-space lines: a zombie's, or one past exit_mm. */
export function addressSpaceGone(status: string): boolean {
  return /^Name:/m.test(status) && !/^VmRSS:/m.test(status);
}

/** The core's own resident memory: the runtime asks the OS (every platform). */
export function coreResidentBytes(): number | null {
  try {
    return process.memoryUsage.rss();
  } catch {
    return null;
  }
}

/**
 * How much of its model a loading llama-server has taken in, two ways, because it loads one of
 * two ways (measured on the real server, docs/supervisor.md): memory-mapped (the default), the
 * resident pages of its `.gguf` mappings (/proc/<pid>/smaps) grow as the file is paged in;
 * without mmap (`--no-mmap`, `--load-mode none`) the mapping does not exist and the bytes it has
 * read with read() (/proc/<pid>/io `rchar`) grow instead. Null off Linux or when unreadable.
 */
export function modelIntake(pid: number): { mappedBytes: number; readBytes: number } | null {
  if (process.platform !== "linux") return null;
  try {
    const readBytes = Number(readFileSync(`/proc/${pid}/io`, "utf8").match(/^rchar: (\d+)/m)?.[1] ?? 0);
    return { mappedBytes: ggufMappedBytes(readFileSync(`/proc/${pid}/smaps`, "utf8")), readBytes };
  } catch {
    return null;
  }
}

/** Sum of `Rss:` over the mappings of files ending in .gguf, from the text of /proc/<pid>/smaps. */
export function ggufMappedBytes(smaps: string): number {
  let total = 0;
  let inModel = false;
  for (const line of smaps.split("\n")) {
    // A mapping's header starts with its address range ("7f…-7f… r--s 00000000 fd:01 123 /path").
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) inModel = /\.gguf( \(deleted\))?$/i.test(line);
    else if (inModel && line.startsWith("Rss:")) total += Number(line.match(/(\d+) kB/)?.[1] ?? 0) * 1024;
  }
  return total;
}

/**
 * The share of a model of `modelBytes` taken in since `baseline` (the `rchar` when the wait
 * began: a wake reloads in a process that has read before), 0–1; undefined when it cannot be
 * measured.
 */
export function intakeFraction(
  intake: { mappedBytes: number; readBytes: number } | null,
  modelBytes: number | undefined,
  baselineReadBytes = 0,
): number | undefined {
  if (!intake || !modelBytes || modelBytes <= 0) return undefined;
  const taken = Math.max(intake.mappedBytes, intake.readBytes - baselineReadBytes);
  return Math.min(1, Math.max(0, taken / modelBytes));
}
