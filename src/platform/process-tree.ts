import { existsSync, readdirSync, readFileSync } from "node:fs";
import { statFieldsOf } from "./proc-stat.ts";

/**
 * The processes a child started, found by their parent pids, so that a child that is killed
 * does not leave its own children behind: `llama.binary` may be a wrapper script that runs
 * llama-server without `exec`, and SIGKILL of the script orphans what it started (a hung
 * `--version` under it ran on); an MCP server may start a process in a session of its own
 * (agent/mcp/escaped.ts). Linux only (`/proc`); elsewhere none are found and only the child
 * itself is killed. A process started after the look escapes it.
 */

/** One process as /proc/<pid>/stat gives it: its start time tells it from a later one of its pid. */
export interface ProcEntry {
  pid: number;
  ppid: number;
  pgid: number;
  /** Clock ticks after boot (field 22): a reused pid has a later one. */
  start: string;
  /** Field 3 (R, S, D, Z…), where read from /proc (group-live.ts: zombies do not run). */
  state?: string;
}

/** Every process as the OS lists it now, and one process's start time. */
export interface ProcReader {
  list(): Iterable<ProcEntry>;
  startOf(pid: number): string | null;
}

/**
 * The most descendants one look reads: each costs /proc reads on the main loop (50–90 ms for
 * 2,000), so a server that forks without end held the loop for seconds at every call's look and
 * every stop (a hostile review). Those past it are missed, as one started after the look is.
 */
export const MAX_DESCENDANTS = 4096;

/**
 * What `pid` started, and what those started, breadth first, at most `max`. On Linux through the
 * kernel's own children lists where it keeps them (only the tree is read: `descendantsByChildren`),
 * else from a listing of every process.
 */
export function descendantsOf(pid: number, proc: ProcReader = linuxProc, max = MAX_DESCENDANTS): ProcEntry[] {
  const tree = proc === linuxProc ? descendantsByChildren(pid, max) : null;
  if (tree) return tree;
  const children = new Map<number, ProcEntry[]>();
  for (const entry of proc.list()) {
    const list = children.get(entry.ppid);
    if (list) list.push(entry);
    else children.set(entry.ppid, [entry]);
  }
  const found: ProcEntry[] = [];
  const queue = [pid];
  // The tree is walked breadth first and each pid taken once: a cycle in what /proc said
  // between reads cannot loop.
  const seen = new Set(queue);
  while (queue.length > 0 && found.length < max) {
    for (const c of children.get(queue.shift() as number) ?? []) {
      if (seen.has(c.pid) || found.length >= max) continue;
      seen.add(c.pid);
      found.push(c);
      queue.push(c.pid);
    }
  }
  return found;
}

/** Kills a child and every process under it (SIGKILL), each that is gone already skipped. */
export function killTree(pid: number, proc: ProcReader = linuxProc): void {
  for (const p of [pid, ...descendantsOf(pid, proc).map((e) => e.pid)]) sendSignal(p, "SIGKILL");
}

/**
 * Sends `sig` to each of `entries` that is still the process that was seen (its pid not reused
 * since: the same start time); returns how many were sent it.
 */
export function signalSame(
  entries: readonly ProcEntry[],
  sig: NodeJS.Signals,
  proc: ProcReader = linuxProc,
): number {
  let sent = 0;
  for (const e of entries) if (proc.startOf(e.pid) === e.start && sendSignal(e.pid, sig)) sent++;
  return sent;
}

function sendSignal(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false; // gone meanwhile
  }
}

/**
 * `descendantsOf` through the kernel's own lists (/proc/<pid>/task/<tid>/children): only the tree
 * is read, not every process (listing /proc costs ~14 µs a process, 45 ms at 3,000); at most
 * `max` of them. Null off Linux, or where the kernel keeps no such lists (CONFIG_PROC_CHILDREN)
 * or the process is gone.
 */
export function descendantsByChildren(pid: number, max = 256): ProcEntry[] | null {
  if (process.platform !== "linux" || !existsSync(`/proc/${pid}/task/${pid}/children`)) return null;
  const found: ProcEntry[] = [];
  const seen = new Set([pid]);
  const queue = [pid];
  while (queue.length > 0 && found.length < max) {
    for (const child of childrenOf(queue.shift() as number)) {
      if (seen.has(child) || found.length >= max) continue;
      seen.add(child);
      const entry = entryOf(child);
      if (!entry) continue; // gone meanwhile
      found.push(entry);
      queue.push(child);
    }
  }
  return found;
}

/** The pids every thread of `pid` started, from its tasks' `children` files; none once it is gone. */
function childrenOf(pid: number): number[] {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const tid of tids) {
    try {
      for (const word of readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" "))
        if (/^\d+$/.test(word)) pids.push(Number(word));
    } catch {
      // The thread ended between the listing and the read.
    }
  }
  return pids;
}

export const linuxProc: ProcReader = {
  *list() {
    if (process.platform !== "linux") return;
    let names: string[];
    try {
      names = readdirSync("/proc");
    } catch {
      return;
    }
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const entry = entryOf(Number(name));
      if (entry) yield entry;
    }
  },
  startOf: (pid) => (process.platform === "linux" ? (entryOf(pid)?.start ?? null) : null),
};

/** Fields 3 (state), 4 (ppid), 5 (pgrp) and 22 (starttime) of /proc/<pid>/stat; null when it is gone. */
export function entryOf(pid: number): ProcEntry | null {
  try {
    const f = statFieldsOf(readFileSync(`/proc/${pid}/stat`, "utf8"));
    const ppid = Number(f[1]);
    const pgid = Number(f[2]);
    const start = f[19];
    if (!Number.isInteger(ppid) || !Number.isInteger(pgid) || !start) return null;
    return { pid, ppid, pgid, start, state: f[0] };
  } catch {
    return null;
  }
}
