import { readdirSync, readFileSync } from "node:fs";

/**
 * CPU time a process has used so far, in ns, summed over its live threads (Linux
 * /proc/<pid>/task/<tid>/schedstat; Bun's HTTP client runs on a thread of its own). Unlike wall
 * time on a shared 2-core machine, it barely moves with what other processes do. NaN elsewhere.
 */
export function cpuNs(pid: number): number {
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return Number.NaN;
  }
  let total = 0;
  for (const tid of tasks) {
    try {
      total += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return total;
}

/**
 * Each live thread of a process, by thread id: its name (`/proc/<pid>/task/<tid>/comm`, trailing
 * digits dropped: Bun's JS thread carries the program's name, then `HTTP Client`, `mi-scavenger`,
 * `JITWorker`, `HeapHelper`…) and its CPU time (ns) so far. Empty elsewhere than Linux.
 */
export type ThreadTimes = Map<string, { name: string; ns: number }>;

export function threadTimes(pid: number): ThreadTimes {
  const times: ThreadTimes = new Map();
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return times;
  }
  for (const tid of tasks) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim().replace(/\d+$/, "");
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      times.set(tid, { name, ns });
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return times;
}

/**
 * The CPU (ns) spent between two snapshots of one process, in all and by thread name: each
 * thread's own difference, one born since counted whole, one that ended since left out (its time
 * since the first snapshot is lost, a slight undercount). A difference of sums over the live
 * threads took an ended thread's whole earlier time off: a reply's CPU could read below zero.
 */
export function cpuSpent(
  before: ThreadTimes,
  after: ThreadTimes,
): { total: number; byName: Map<string, number> } {
  const byName = new Map<string, number>();
  let total = 0;
  for (const [tid, { name, ns }] of after) {
    const spent = Math.max(0, ns - (before.get(tid)?.ns ?? 0));
    total += spent;
    byName.set(name, (byName.get(name) ?? 0) + spent);
  }
  return { total, byName };
}

/** This process's own CPU time in ns (every thread). */
export function selfCpuNs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
}

/** The children of `pid` (llama-server under the core), from /proc. */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").split(" ").filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
