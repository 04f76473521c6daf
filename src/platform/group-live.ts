import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { exitedWhole } from "./pid-alive.ts";
import { entryOf, linuxProc, type ProcEntry } from "./process-tree.ts";

/**
 * Whether a process group still has a member that runs. kill(-pgid, 0) succeeds while any member
 * exists, a zombie included: a wrapper's llama-server orphaned by its shell's death is init's to
 * collect, and where init is slow (a container whose pid 1 is no real init) or never collects (a
 * core that is itself pid 1), a stop or the start-up reap waited its whole grace for it, then
 * sent a needless SIGKILL, though the process had freed its memory at exit. On Linux a group whose
 * members are all zombies is gone (docs/supervisor.md "Orphans"); elsewhere, kill's answer.
 */

/** One process: its group and state (process-tree.ts `ProcEntry`). */
export type GroupEntry = Pick<ProcEntry, "pid" | "pgid" | "state">;

/** What the probe reads of /proc (tests inject one). */
export interface GroupProcReader {
  /** Every process now. */
  list(): Iterable<GroupEntry>;
  /** One process now; null once it is gone. */
  entry(pid: number): GroupEntry | null;
  /** Its threads' ids: a leader that exited while its threads run shows Z too. */
  tasks(pid: number): readonly number[];
  /**
   * Whether /proc shows every process there is to signal: one mounted with hidepid shows none of
   * other users', one of another pid namespace other pids. Absent: it does.
   */
  whole?(): boolean;
}

export type GroupKill = (pid: number, signal: 0) => void;

/**
 * A probe for groups, remembering the running members it found: while one of them still runs in
 * the group only that one is read, so a member that lingers for seconds costs no listing of every
 * process (~14 µs each) at every poll on the main loop.
 */
export function groupLiveProbe(
  kill: GroupKill = (pid, signal) => process.kill(pid, signal),
  proc: GroupProcReader | null = defaultGroupProc(),
): (pgid: number) => boolean {
  let known: number[] = [];
  // Groups /proc showed no member of while the signal reached one: hidden from it (hidepid, a
  // /proc of another pid namespace), so listing it again at each poll (50 ms, up to 60 s) would
  // only hold the loop; kill's answer stands for them.
  const unseen = new Set<number>();
  return (pgid) => {
    try {
      kill(-pgid, 0);
    } catch (err) {
      // EPERM: members exist, none this user's to signal (as isAlive answers for one process).
      return (err as NodeJS.ErrnoException).code === "EPERM";
    }
    // A zombie seen beside a member /proc hides would count the group gone, left unkilled.
    if (!proc || unseen.has(pgid) || proc.whole?.() === false) return true;
    if (known.some((pid) => runsIn(proc.entry(pid), pgid, proc))) return true;
    const members = [...proc.list()].filter((e) => e.pgid === pgid);
    known = members.filter((e) => runsIn(e, pgid, proc)).map((e) => e.pid);
    // None seen at all: /proc hides them, or they ended since the signal; kill's answer stands.
    if (members.length === 0) unseen.add(pgid);
    return members.length === 0 || known.length > 0;
  };
}

/** The reader where /proc is (Linux); elsewhere none. */
export const defaultGroupProc = (): GroupProcReader | null =>
  process.platform === "linux" ? linuxGroupProc : null;

function runsIn(e: GroupEntry | null, pgid: number, proc: GroupProcReader): boolean {
  return !!e && e.pgid === pgid && !exitedWhole(e.pid, e.state, () => proc.tasks(e.pid));
}

/**
 * Whether the /proc of `mountinfo` (/proc/self/mountinfo) shows every process: mounted without
 * hidepid (or with 0/off), and `self` (where /proc/self points) is this process's own pid, not the
 * pid it has in another namespace's /proc. Unread (null): it is not known to.
 */
export function procShowsAll(mountinfo: string | null, self: string | null): boolean {
  if (self !== String(process.pid) || mountinfo === null) return false;
  const proc = mountinfo
    .split("\n")
    .map((line) => line.split(" - "))
    .filter(([mount, fs]) => mount?.split(" ")[4] === "/proc" && fs?.startsWith("proc "))
    .at(-1);
  if (!proc) return false;
  const hide = (proc[1]?.split(" ")[2] ?? "").split(",").find((o) => o.startsWith("hidepid="));
  return hide === undefined || ["hidepid=0", "hidepid=off"].includes(hide);
}

let showsAll: boolean | undefined;

function readOrNull(read: () => string): string | null {
  try {
    return read();
  } catch {
    return null;
  }
}

export const linuxGroupProc: GroupProcReader = {
  list: () => linuxProc.list(),
  entry: entryOf,
  whole() {
    if (showsAll === undefined)
      showsAll = procShowsAll(
        readOrNull(() => readFileSync("/proc/self/mountinfo", "utf8")),
        readOrNull(() => readlinkSync("/proc/self")),
      );
    return showsAll;
  },
  tasks(pid) {
    try {
      return readdirSync(`/proc/${pid}/task`).map(Number);
    } catch {
      return [];
    }
  },
};
