import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { statFieldsOf } from "./proc-stat.ts";
import { windowsPidAlive } from "./windows/process.ts";

/**
 * Whether one process is alive, for anything that judges another core's lock or record by its
 * pid (runtime/proc-info.ts `isAlive`, store/session-lease.ts, models/download-lock.ts). kill(pid,
 * 0) succeeds for a zombie too: a core that died but that its host has not collected yet (an app
 * that spawned it and never waits on it) still answers, and a session lease or a download lock it
 * held was kept until its time ran out, a chat or a pull waiting for nothing. On Linux a zombie is
 * dead unless threads of it still run (its leader alone exited); on Windows the process object's
 * state is asked (a handle held open keeps an exited process's pid answering); elsewhere kill's
 * answer stands.
 */

/** What the probe reads (tests inject one). */
export interface PidProbe {
  /** kill(pid, 0): throws ESRCH for no such process, EPERM for another user's. */
  kill(pid: number): void;
  /** /proc/<pid>/stat's text; throws as the read does. Absent off Linux. */
  stat?(pid: number): string;
  /** The ids of the process's threads (/proc/<pid>/task). */
  tasks?(pid: number): readonly number[];
  /** Windows' answer (platform/windows/process.ts); null where it cannot tell. */
  windows?(pid: number): boolean | null;
  /**
   * Whether /proc's pids are this namespace's (/proc/self is this process): one of another pid
   * namespace (a container given the host's) names another process by the pid, whose zombie made
   * a live core dead and its lease or lock taken at once. Absent: they are.
   */
  procIsOurs?(): boolean;
}

let procOurs: boolean | undefined;

const osProbe: PidProbe = {
  kill: (pid) => process.kill(pid, 0),
  ...(process.platform === "linux"
    ? {
        stat: (pid: number) => readFileSync(`/proc/${pid}/stat`, "utf8"),
        tasks: (pid: number) => readdirSync(`/proc/${pid}/task`).map(Number),
        procIsOurs: () => {
          if (procOurs === undefined) {
            try {
              procOurs = readlinkSync("/proc/self") === String(process.pid);
            } catch {
              procOurs = false;
            }
          }
          return procOurs;
        },
      }
    : {}),
  ...(process.platform === "win32" ? { windows: (pid: number) => windowsPidAlive(pid) } : {}),
};

export function pidAlive(pid: number, probe: PidProbe = osProbe): boolean {
  // kill(0, 0) asks this process's group, kill(-1, 0) every process: neither is one process.
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  const windows = probe.windows?.(pid) ?? null;
  if (windows !== null) return windows;
  try {
    probe.kill(pid);
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
  return !deadZombie(pid, probe);
}

/** A zombie none of whose threads runs; false where /proc cannot tell (kill's answer stands). */
function deadZombie(pid: number, probe: PidProbe): boolean {
  if (!probe.stat || probe.procIsOurs?.() === false) return false;
  let state: string | undefined;
  try {
    state = statFieldsOf(probe.stat(pid))[0];
  } catch {
    return false;
  }
  return exitedWhole(pid, state, () => {
    try {
      return probe.tasks?.(pid) ?? [];
    } catch {
      return [];
    }
  });
}

/** A /proc stat state of a process that has exited: a zombie, or dead. */
export const exitedState = (state: string | undefined): boolean => ["Z", "X", "x"].includes(state ?? "");

/**
 * Exited, and no thread of it still runs: a leader that exited while its threads run shows Z too
 * (pidAlive, group-live.ts).
 */
export function exitedWhole(pid: number, state: string | undefined, tasks: () => readonly number[]): boolean {
  return exitedState(state) && !tasks().some((tid) => tid !== pid);
}
