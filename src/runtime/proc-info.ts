import { readFileSync, readlinkSync } from "node:fs";
import { exitedState, pidAlive } from "../platform/pid-alive.ts";
import { statFieldsOf } from "../platform/proc-stat.ts";
import { windowsProcessIdentity } from "../platform/windows/process.ts";
import { allowedEnv } from "../util/child-allowlist.ts";

/**
 * What identifies a process beyond its pid (pids are reused): when it started and how it was
 * launched. Linux reads /proc; macOS and other Unixes ask `ps`; Windows asks kernel32 (creation
 * time and executable: it documents no way to read another process's command line).
 */
export interface ProcIdentity {
  /** Fixed at fork, so unchanged when a wrapper script `exec`s the real program. */
  start_time: string;
  /** The argument vector joined by spaces (what `ps` shows). */
  cmdline: string;
  /** The exact argument vector, where the OS gives it (Linux). */
  argv?: string[];
  /** The running executable's resolved path, where the OS gives it (Linux). */
  exe?: string;
}

/** Whether a process is alive, a zombie not (platform/pid-alive.ts). */
export function isAlive(pid: number): boolean {
  return pidAlive(pid);
}

/**
 * Whether our own child `pid` still runs, from /proc alone; undefined where the OS has no /proc.
 * Not running: no entry, a zombie, or on its way out, which a killed process is from the moment
 * kill() returns though it may take milliseconds to become a zombie (while the kernel frees its
 * memory, its port may still take connections): its leader exiting (`PF_EXITING` in stat's
 * flags) or a SIGKILL pending (the kernel gives every thread of a process a fatal signal hits
 * one, and keeps the one kill() sent in the process's shared set). Two small reads, no round trip.
 */
export function childRunning(pid: number): boolean | undefined {
  if (process.platform !== "linux") return undefined;
  try {
    const fields = statFields(pid);
    if (exitedState(fields[0])) return false;
    return !exiting(fields) && !killPending(pid);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ENOENT" ? false : undefined;
  }
}

/** The kernel's flag on a task in do_exit (include/linux/sched.h). */
const PF_EXITING = 0x4;

/** SIGKILL (9) in a mask of signals: bit 8. */
const SIGKILL_BIT = 0x100;

/**
 * Whether stat's fields (`statFields`) show the leader on its way out: `PF_EXITING` in its flags
 * (field 9), or SIGKILL in its pending signals (field 31, the thread's own: a fatal signal puts
 * SIGKILL there on every thread of the process, kernel/signal.c `complete_signal`).
 */
export function exiting(fields: readonly string[]): boolean {
  return (Number(fields[6]) & PF_EXITING) !== 0 || (Number(fields[28]) & SIGKILL_BIT) !== 0;
}

/**
 * Whether a SIGKILL sent to the whole process waits in its shared pending set (/proc status's
 * `ShdPnd`, hex). kill() queues it there and it stays until the process is gone, while the
 * thread's own copy (stat's field 31) is taken off a few µs before `PF_EXITING` is set
 * (kernel/signal.c `get_signal`): without this a process killed on another CPU read as running
 * about once in 30 tries.
 */
function killPending(pid: number): boolean {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const mask = /^ShdPnd:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  return mask !== undefined && (Number.parseInt(mask.slice(-8), 16) & SIGKILL_BIT) !== 0;
}

/** /proc/<pid>/stat's fields after comm (platform/proc-stat.ts). Throws as the read does. */
function statFields(pid: number): string[] {
  return statFieldsOf(readFileSync(`/proc/${pid}/stat`, "utf8"));
}

export function procIdentity(pid: number): ProcIdentity | null {
  try {
    if (process.platform === "linux") return linuxIdentity(pid);
    if (process.platform === "win32") return windowsProcessIdentity(pid);
    return psIdentity(pid);
  } catch {
    return null;
  }
}

function linuxIdentity(pid: number): ProcIdentity | null {
  const fields = statFields(pid);
  const startTime = fields[19]; // field 22 overall: start time in clock ticks since boot
  if (!startTime) return null;
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0+$/, "").split("\0");
  let exe: string | undefined;
  try {
    exe = readlinkSync(`/proc/${pid}/exe`);
  } catch {
    // Unreadable for another user's process or a kernel thread; the argv still tells.
  }
  return { start_time: startTime, cmdline: argv.join(" "), argv, ...(exe ? { exe } : {}) };
}

function psIdentity(pid: number): ProcIdentity | null {
  // A probe is a child too: never the core's whole environment (util/child-allowlist.ts).
  const env = allowedEnv(process.env);
  const lstart = Bun.spawnSync(["ps", "-o", "lstart=", "-p", String(pid)], { env });
  const command = Bun.spawnSync(["ps", "-o", "command=", "-p", String(pid)], { env });
  const start = lstart.stdout.toString().trim();
  if (lstart.exitCode !== 0 || !start) return null;
  return { start_time: start, cmdline: command.stdout.toString().trim() };
}

/**
 * When process `pid` started by the wall clock (ms since the epoch), where the OS lets it be
 * worked out; null otherwise. Linux: boot time (`btime` of /proc/stat) plus the start's clock
 * ticks (USER_HZ, 100 on every Linux ABI); Windows: the creation FILETIME; elsewhere `ps`'s
 * `lstart` (to the second). It says a process cannot be one that wrote a record before it started.
 */
export function processStartedAt(pid: number): number | null {
  const id = procIdentity(pid);
  return id ? startedAtMs(id.start_time) : null;
}

let own: { value: string | null } | undefined;
/** This process's `start_time` (procIdentity's), asked once: it never changes. */
export function ownStartTime(): string | null {
  own ??= { value: procIdentity(process.pid)?.start_time ?? null };
  return own.value;
}

/** `start_time` (procIdentity's, on this OS) as wall-clock ms; null when it cannot say. */
export function startedAtMs(startTime: string, platform: string = process.platform): number | null {
  if (platform === "linux") {
    const boot = bootTimeMs();
    return boot === null || !/^\d+$/.test(startTime) ? null : boot + Number(startTime) * 10;
  }
  if (platform === "win32") {
    if (!/^\d+$/.test(startTime)) return null;
    // FILETIME: 100 ns steps since 1601-01-01.
    return Number(BigInt(startTime) / 10_000n) - 11_644_473_600_000;
  }
  const parsed = Date.parse(startTime);
  return Number.isNaN(parsed) ? null : parsed;
}

let bootMs: { value: number | null } | undefined;
function bootTimeMs(): number | null {
  if (!bootMs) {
    let value: number | null = null;
    try {
      const m = /^btime (\d+)$/m.exec(readFileSync("/proc/stat", "utf8"));
      if (m) value = Number(m[1]) * 1000;
    } catch {
      // No /proc/stat (a sandbox): no wall-clock start.
    }
    bootMs = { value };
  }
  return bootMs.value;
}

/**
 * A fingerprint of how much work a loading process has done (its main thread's CPU time, major
 * page faults, bytes read): when it changes, the load is making progress even if the log is
 * quiet. The main thread's CPU only: llama-server loads there while its HTTP threads answer the
 * start-up's own /health polls, whose CPU made a load stuck on a frozen RPC worker look alive
 * until the 10 × timeout cap (docs/supervisor.md "Start-up timeout"); the whole process's where
 * the thread's stat cannot be read. Linux only; elsewhere null, and log lines are the only progress signal.
 */
export function workFingerprint(pid: number, read: (path: string) => string = readText): string | null {
  if (process.platform !== "linux") return null;
  try {
    const f = statFieldsOf(read(`/proc/${pid}/stat`));
    // majflt (12), utime (14), stime (15) → indices 9, 11, 12 after the comm field.
    let cpu: string;
    try {
      const main = statFieldsOf(read(`/proc/${pid}/task/${pid}/stat`));
      cpu = `${main[11]}:${main[12]}`;
    } catch {
      // No per-thread stat (a hardened or partial /proc): the process's CPU, polls and all,
      // still tells a working load from a dead one, as it did before the main thread was read.
      cpu = `all ${f[11]}:${f[12]}`;
    }
    let io = "";
    try {
      io = read(`/proc/${pid}/io`).match(/rchar: (\d+)/)?.[1] ?? "";
    } catch {
      // /proc/<pid>/io may be unreadable under some hardening; CPU and faults still tell.
    }
    return `${f[9]}:${cpu}:${io}`;
  } catch {
    return null;
  }
}

const readText = (path: string) => readFileSync(path, "utf8");
