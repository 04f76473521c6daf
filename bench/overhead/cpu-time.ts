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
 * CPU time (ns) so far of each of a process's live threads, summed by thread name with trailing
 * digits dropped (`/proc/<pid>/task/<tid>/comm`: Bun's JS thread carries the program's name, then
 * `HTTP Client`, `mi-scavenger`, `JITWorker`, `HeapHelper`…). Empty elsewhere than Linux.
 */
export function cpuNsByThread(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return byName;
  }
  for (const tid of tasks) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim().replace(/\d+$/, "");
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
      byName.set(name, (byName.get(name) ?? 0) + ns);
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return byName;
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
