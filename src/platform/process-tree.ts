import { readdirSync, readFileSync } from "node:fs";
import { statFieldsOf } from "./proc-stat.ts";

/**
 * The processes a child started, found by their parent pids, so that a probe that is killed
 * does not leave its own children behind: `llama.binary` may be a wrapper script that runs
 * llama-server without `exec`, and SIGKILL of the script orphans what it started (a hung
 * `--version` under it ran on). Linux only (`/proc`); elsewhere none are found and only the
 * child itself is killed. A process started after the look escapes it.
 */
export function descendantsOf(pid: number, proc: ProcReader = linuxProc): number[] {
  const children = new Map<number, number[]>();
  for (const [child, parent] of proc.parents()) {
    const list = children.get(parent);
    if (list) list.push(child);
    else children.set(parent, [child]);
  }
  const found: number[] = [];
  const queue = [pid];
  // The tree is walked breadth first and each pid taken once: a cycle in what /proc said
  // between reads cannot loop.
  const seen = new Set(queue);
  while (queue.length > 0) {
    for (const c of children.get(queue.shift() as number) ?? []) {
      if (seen.has(c)) continue;
      seen.add(c);
      found.push(c);
      queue.push(c);
    }
  }
  return found;
}

/** Kills a child and every process under it (SIGKILL), each that is gone already skipped. */
export function killTree(pid: number, proc: ProcReader = linuxProc): void {
  for (const p of [pid, ...descendantsOf(pid, proc)]) {
    try {
      process.kill(p, "SIGKILL");
    } catch {
      // Gone meanwhile.
    }
  }
}

/** Every process's pid and parent pid, as the OS lists them now. */
export interface ProcReader {
  parents(): Iterable<[number, number]>;
}

const linuxProc: ProcReader = {
  *parents() {
    if (process.platform !== "linux") return;
    let names: string[];
    try {
      names = readdirSync("/proc");
    } catch {
      return;
    }
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const parent = parentOf(name);
      if (parent !== null) yield [Number(name), parent];
    }
  },
};

/** The ppid in /proc/<pid>/stat (the field after the state). */
function parentOf(pid: string): number | null {
  try {
    const ppid = Number(statFieldsOf(readFileSync(`/proc/${pid}/stat`, "utf8"))[1]);
    return Number.isInteger(ppid) ? ppid : null;
  } catch {
    return null; // gone meanwhile
  }
}
