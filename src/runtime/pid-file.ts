import { readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { logger } from "../util/logger.ts";
import { ensurePrivateDir } from "../util/private-fs.ts";
import { isAlive, type ProcIdentity, procIdentity } from "./proc-info.ts";

/**
 * The record of a running llama-server, so a core killed outright (kill -9, power button on
 * the host) leaves enough behind for the next core to stop the orphan — and only the orphan:
 * pids are reused, so the start time and command line must match, and the owning core must be
 * dead. One file per owning core: run/llama-server-<core pid>.json under the data directory.
 */
export interface PidRecord {
  pid: number;
  start_time: string;
  cmdline: string;
  port: number;
  owner: { pid: number; start_time: string | null };
  written_at: string;
}

export function runDir(dataDir: string): string {
  return join(dataDir, "run");
}

export function pidFilePath(dataDir: string, ownerPid = process.pid): string {
  return join(runDir(dataDir), `llama-server-${ownerPid}.json`);
}

/** Written atomically (temp file + rename), so a crash mid-write leaves the old or the new one. */
export function writePidRecord(dataDir: string, child: { pid: number; port: number }): PidRecord | null {
  const id = procIdentity(child.pid);
  if (!id) return null;
  const record: PidRecord = {
    pid: child.pid,
    start_time: id.start_time,
    cmdline: id.cmdline,
    port: child.port,
    owner: { pid: process.pid, start_time: procIdentity(process.pid)?.start_time ?? null },
    written_at: new Date().toISOString(),
  };
  const file = pidFilePath(dataDir);
  ensurePrivateDir(runDir(dataDir));
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  renameSync(tmp, file);
  return record;
}

export function removePidRecord(dataDir: string): void {
  rmSync(pidFilePath(dataDir), { force: true });
}

export type ReapOutcome =
  | { file: string; action: "stopped"; pid: number; signal: "SIGTERM" | "SIGKILL" }
  | { file: string; action: "gone" | "not_ours" | "owner_alive" | "unreadable"; pid?: number }
  | { file: string; action: "failed"; pid: number; error: string };

export interface ReapOptions {
  /** Polite-signal grace before SIGKILL; the whole reap stays well inside the SPEC's 10 s. */
  graceMs?: number;
  identity?: (pid: number) => ProcIdentity | null;
  alive?: (pid: number) => boolean;
}

/**
 * Stops llama-servers left behind by dead cores that used this data directory. A record is
 * acted on only when its core is dead (pid gone, or reused by another process) and its child
 * is still the very process recorded (same pid, start time and command line). Never by name.
 */
export async function reapLeftover(dataDir: string, options: ReapOptions = {}): Promise<ReapOutcome[]> {
  const identity = options.identity ?? procIdentity;
  const alive = options.alive ?? isAlive;
  const graceMs = options.graceMs ?? 3000;
  let names: string[];
  try {
    names = readdirSync(runDir(dataDir)).filter((n) => /^llama-server-\d+\.json$/.test(n));
  } catch {
    return [];
  }
  const outcomes: ReapOutcome[] = [];
  for (const name of names) {
    const file = join(runDir(dataDir), name);
    const record = readRecord(file);
    if (!record) {
      outcomes.push({ file, action: "unreadable" });
      continue;
    }
    if (record.owner.pid === process.pid) continue; // our own, live child
    if (ownerAlive(record, identity, alive)) {
      outcomes.push({ file, action: "owner_alive", pid: record.pid });
      continue;
    }
    const outcome = await reapOne(file, record, identity, alive, graceMs);
    if (outcome.action !== "failed") rmSync(file, { force: true });
    outcomes.push(outcome);
  }
  for (const o of outcomes)
    if (o.action !== "gone") logger.info(`leftover llama-server ${o.pid ?? "?"}: ${o.action}`);
  return outcomes;
}

function readRecord(file: string): PidRecord | null {
  try {
    const r = JSON.parse(readFileSync(file, "utf8")) as PidRecord;
    if (typeof r.pid !== "number" || typeof r.start_time !== "string" || typeof r.cmdline !== "string")
      return null;
    if (!r.owner || typeof r.owner.pid !== "number") return null;
    return r;
  } catch {
    return null;
  }
}

function ownerAlive(
  r: PidRecord,
  identity: ReapOptions["identity"] & {},
  alive: (pid: number) => boolean,
): boolean {
  if (!alive(r.owner.pid)) return false;
  // Alive under the same pid: ours only if it started when the record says (else pid reuse).
  const id = identity(r.owner.pid);
  if (!id || r.owner.start_time === null) return true; // cannot tell: err on the side of not killing
  return id.start_time === r.owner.start_time;
}

async function reapOne(
  file: string,
  r: PidRecord,
  identity: (pid: number) => ProcIdentity | null,
  alive: (pid: number) => boolean,
  graceMs: number,
): Promise<ReapOutcome> {
  if (!alive(r.pid)) return { file, action: "gone", pid: r.pid };
  const id = identity(r.pid);
  if (!id || id.start_time !== r.start_time || id.cmdline !== r.cmdline)
    return { file, action: "not_ours", pid: r.pid };
  try {
    process.kill(r.pid, "SIGTERM");
    if (await waitGone(r.pid, alive, graceMs))
      return { file, action: "stopped", pid: r.pid, signal: "SIGTERM" };
    process.kill(r.pid, "SIGKILL");
    if (await waitGone(r.pid, alive, 2000)) return { file, action: "stopped", pid: r.pid, signal: "SIGKILL" };
    return { file, action: "failed", pid: r.pid, error: "still alive after SIGKILL" };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return { file, action: "gone", pid: r.pid };
    return { file, action: "failed", pid: r.pid, error: String((err as Error).message) };
  }
}

async function waitGone(pid: number, alive: (pid: number) => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!alive(pid)) return true;
    await Bun.sleep(50);
  }
  return !alive(pid);
}
