import { renameSync } from "node:fs";
import { basename, join } from "node:path";
import { defaultGroupProc, type GroupProcReader } from "../platform/group-live.ts";
import { eitherPartOf, pidSpace, writtenRelation } from "../platform/pid-space.ts";
import { drives } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { namesIn } from "../util/names-in.ts";
import { once } from "../util/once.ts";
import { ensurePrivateTree, replacePrivateFile } from "../util/private-fs.ts";
import { NotOwnFile } from "../util/read-file.ts";
import { groupMembers, judgeAsked, leaderGone, procGroupOf, stopLeftover } from "./leftover-stop.ts";
import { forgetOwnRecord, keepOwnRecord, removeRecordFile } from "./own-records.ts";
import {
  type ChildKind,
  type PidRecord,
  readRecord,
  readRecordText,
  untouchedLong,
} from "./pid-record-read.ts";
import { isAlive, type ProcIdentity, procIdentity } from "./proc-info.ts";

export { readRecord, removeRecordFile };

import { GROUP_EXIT_WAIT_MS, groupEnds } from "./spawn.ts";

/**
 * Records of the processes a core launches (llama-server, MCP servers), so a core killed
 * outright (kill -9, power button on the host) leaves enough behind for the next core to stop
 * the orphans, and only them: the owning core must be dead and the process must still be the
 * one launched (leftover-verdict.ts). Under the data directory's run/: llama-server-<core
 * pid>.<pid space>.json, one per core; mcp/<core pid>.<pid space>-<server pid>.json, one per MCP
 * server process. The pid space (platform/pid-space.ts) in the name: two cores in two containers
 * sharing one data folder are often the same pid (1, 7), and wrote over each other's record (its
 * llama-server then never reaped, a stop removing the other's). An older core's names, without
 * it, are read and reaped alike.
 */
export type { ChildKind, PidRecord };

/** A child as spawned: its pid, and the program and arguments given to spawn. */
export interface Launched {
  pid: number;
  binary: string;
  argv: string[];
}

export function runDir(dataDir: string): string {
  return join(dataDir, "run");
}

/**
 * One record per llama-server this core runs: the model section's keeps today's name, another
 * model's (several models, docs/supervisor.md) is suffixed by its `instance` name.
 */
export function pidFilePath(
  dataDir: string,
  ownerPid = process.pid,
  instance?: string,
  space = nameSpace(),
): string {
  return join(runDir(dataDir), `llama-server-${ownerPid}.${space}${instance ? `-${instance}` : ""}.json`);
}

/** The records' names, this version's and an older core's (no pid space). */
export const LLAMA_RECORD_NAME = /^llama-server-\d+(\.[0-9a-f]+)?(-[A-Za-z0-9._-]+)?\.json$/;
export const MCP_RECORD_NAME = /^\d+(\.[0-9a-f]+)?-\d+\.json$/;

/**
 * This core's pid space as its records' names hold it: the first one asked, kept, so a record is
 * found again at its removal under the name it was written as (a space read in part at first,
 * `cachedSpace`, is whole later). A part missing still leaves the host's and namespace's hashes.
 */
const nameSpace = once(pidSpace);

export function mcpDir(dataDir: string): string {
  return join(runDir(dataDir), "mcp");
}

export function writePidRecord(
  dataDir: string,
  child: Launched & { port: number; group?: boolean },
  instance?: string,
): PidRecord | null {
  const file = pidFilePath(dataDir, process.pid, instance);
  return writeRecord(dataDir, ["run"], file, { kind: "llama-server", ...child });
}

/**
 * Removes this core's record for `instance`; with `pid`, only while it records that pid (an exit
 * seen after its stop: a newer start may have written its own record meanwhile).
 */
export function removePidRecord(dataDir: string, instance?: string, pid?: number): void {
  const file = pidFilePath(dataDir, process.pid, instance);
  if (pid !== undefined && recordedPid(file) !== pid) return;
  removeRecordFile(file);
}

/**
 * After a stop: the record goes once its llama-server is gone. One that outlived its stop (its
 * kill not yet taken, a process stuck in the GPU driver) keeps it, moved off the name the next
 * start writes to and removed at its exit: removed, no later core would reap it once this one
 * quits, and it would hold its memory for good.
 */
export function recordAfterStop(
  dataDir: string,
  instance: string | undefined,
  child: { pid: number; exited: Promise<unknown>; groupLingers?(): boolean },
  alive: (pid: number) => boolean = isAlive,
): void {
  // A wrapper's shell reaped, its llama-server stuck in the group: kept too (spawn.ts groupLingers).
  if (!alive(child.pid) && !child.groupLingers?.()) {
    removePidRecord(dataDir, instance, child.pid);
    return;
  }
  const file = pidFilePath(dataDir, process.pid, instance);
  if (recordedPid(file) !== child.pid) return;
  const aside = pidFilePath(dataDir, process.pid, `${instance ? `${instance}-` : ""}outlived-${child.pid}`);
  try {
    renameSync(file, aside);
    forgetOwnRecord(file);
    keepOwnRecord(aside);
  } catch (err) {
    logger.warn(`the process record ${file} could not be kept aside: ${(err as Error).message}`);
    return;
  }
  logger.warn(`llama-server (pid ${child.pid}) outlived its stop: its record is kept (${aside})`);
  void child.exited
    .then(() => groupEnds(child, Date.now() + GROUP_EXIT_WAIT_MS))
    .then((ended) => ended && removeRecordFile(aside));
}

function recordedPid(file: string): number | undefined {
  try {
    const pid = (JSON.parse(readRecordText(file)) as { pid?: unknown }).pid;
    return typeof pid === "number" ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Records an MCP server process; returns the record's file, for `removeRecordFile` once it is
 * gone. Never throws: a server runs unrecorded (and says so) rather than not at all.
 */
export function writeMcpRecord(dataDir: string, child: Launched & { name: string }): string | null {
  const file = join(mcpDir(dataDir), `${process.pid}.${nameSpace()}-${child.pid}.json`);
  try {
    return writeRecord(dataDir, ["run", "mcp"], file, { kind: "mcp", ...child }) ? file : null;
  } catch (err) {
    logger.warn(`could not record MCP server '${child.name}' (pid ${child.pid}): ${(err as Error).message}`);
    return null;
  }
}

/** Written atomically (temp file + rename), so a crash mid-write leaves the old or the new one. */
function writeRecord(
  dataDir: string,
  folders: string[],
  file: string,
  fields: Launched & { kind: ChildKind; port?: number; name?: string; group?: boolean },
): PidRecord | null {
  const id = procIdentity(fields.pid);
  if (!id) return null;
  const members = fields.kind === "llama-server" && fields.group ? groupMembers(fields.pid) : undefined;
  const record: PidRecord = {
    ...fields,
    ...(members ? { members } : {}),
    start_time: id.start_time,
    cmdline: id.cmdline,
    owner: { pid: process.pid, start_time: procIdentity(process.pid)?.start_time ?? null, space: pidSpace() },
    written_at: new Date().toISOString(),
  };
  // Each folder under data_dir made here, none followed if it is a link (util/private-fs.ts).
  const tmp = join(ensurePrivateTree(dataDir, ...folders), `${basename(file)}.tmp`);
  replacePrivateFile(tmp, file, `${JSON.stringify(record, null, 2)}\n`);
  keepOwnRecord(file);
  return record;
}

/** The places a core would look for llama-server (find-binary.ts's answer), as `configured`. */
export function llamaPrograms(found: { path: string } | { tried: string[] }): string[] {
  return "path" in found ? [found.path] : found.tried;
}

export type ReapOutcome = {
  file: string;
  kind: ChildKind;
} /** `members`: its leader gone, the group's recorded members that were stopped. */ & (
  | { action: "stopped"; pid: number; signal: "SIGTERM" | "SIGKILL"; members?: number[] }
  | { action: "gone" | "not_ours" | "owner_alive"; pid: number }
  | { action: "unexplained"; pid: number; reason: string }
  | { action: "failed"; pid: number; error: string; members?: number[] }
  | { action: "unreadable" }
  /** Written by another user (`uid`), its process alive: never acted on, nor removed. */
  | { action: "foreign"; uid: number }
  /** Written in another pid space (`PidRecord.owner.space`): its pids name nothing of ours; left. */
  | { action: "other_space"; pid: number }
  /** Another space's, untouched for `OTHER_SPACE_KEEP_MS`: its file removed, nothing signalled. */
  | { action: "expired"; pid: number }
);

export interface ReapOptions {
  /**
   * The programs this core is configured to run, per kind (llama.binary or where it would be
   * found; the MCP servers' commands). Records of a kind left out are not looked at.
   */
  configured: Partial<Record<ChildKind, readonly string[]>>;
  /** Polite-signal grace before SIGKILL; the whole reap stays well inside the 10 s of docs/supervisor.md. */
  graceMs?: number;
  identity?: (pid: number) => ProcIdentity | null;
  alive?: (pid: number) => boolean;
  /** process.kill (tests). */
  kill?: (pid: number, signal: NodeJS.Signals | 0) => void;
  /** How long a SIGKILLed leftover is waited for (tests). */
  killWaitMs?: number;
  /** A process's group id (tests; leftover-stop.ts `procGroupOf`). */
  groupOf?: (pid: number) => number | null;
  /** What a group's probe reads of /proc (tests; platform/group-live.ts). */
  groupProc?: GroupProcReader | null;
  /** Whether a path's drive answers (tests; util/drive-answers.ts). */
  driveAnswers?: (path: string) => Promise<boolean>;
  /**
   * The core's user, the only one whose records are acted on (tests pose as another); none on
   * Windows. A record another user wrote (data_dir on a shared folder, a core once run with
   * sudo) could name any process of this user's running a configured program.
   */
  uid?: number;
  /** This core's pid space (tests; platform/pid-space.ts `pidSpace`). */
  space?: string;
}

type Deps = Required<Omit<ReapOptions, "configured" | "uid">> & { uid: number | undefined };

/**
 * Stops the processes left behind by dead cores that used this data directory, all at once
 * (so the time is one grace period, however many there are). A record goes once its process
 * is stopped or provably gone; one whose process lives but is not shown to be ours is kept and
 * logged, never signalled. Never by name.
 */
export async function reapLeftover(dataDir: string, options: ReapOptions): Promise<ReapOutcome[]> {
  const deps: Deps = {
    graceMs: options.graceMs ?? 3000,
    identity: options.identity ?? procIdentity,
    alive: options.alive ?? isAlive,
    kill: options.kill ?? ((pid, signal) => process.kill(pid, signal)),
    killWaitMs: options.killWaitMs ?? 2000,
    groupOf: options.groupOf ?? procGroupOf,
    groupProc: options.groupProc === undefined ? defaultGroupProc() : options.groupProc,
    driveAnswers: options.driveAnswers ?? ((path) => drives.answers(path)),
    // No owners on Windows (a file's uid reads 0): whatever a runtime's getuid says there, no check.
    uid: options.uid ?? (process.platform === "win32" ? undefined : process.getuid?.()),
    space: options.space ?? pidSpace(),
  };
  const files: { file: string; kind: ChildKind }[] = [];
  if (options.configured["llama-server"])
    for (const name of namesIn(runDir(dataDir)).filter((n) => LLAMA_RECORD_NAME.test(n)))
      files.push({ file: join(runDir(dataDir), name), kind: "llama-server" });
  if (options.configured.mcp)
    for (const name of namesIn(mcpDir(dataDir)).filter((n) => MCP_RECORD_NAME.test(n)))
      files.push({ file: join(mcpDir(dataDir), name), kind: "mcp" });
  const settled = await Promise.all(
    files.map(({ file, kind }) => reapFile(file, kind, options.configured[kind] ?? [], deps)),
  );
  const outcomes = settled.filter((o): o is ReapOutcome => o !== null);
  for (const o of outcomes) {
    // An unreadable record names no process to stop, then or ever: kept, it is met at every start.
    if (["stopped", "gone", "not_ours", "unreadable", "expired"].includes(o.action)) removeRecordFile(o.file);
    const members = "members" in o && o.members ? ` (gone; its group's members ${o.members.join(", ")})` : "";
    const what = `leftover ${o.kind} ${"pid" in o ? o.pid : "?"}${members}`;
    if (o.action === "unexplained")
      logger.warn(`${what} left running and its record kept (${o.file}): ${o.reason}`);
    else if (o.action === "foreign")
      logger.warn(`the process record ${o.file} was written by another user (uid ${o.uid}): left alone`);
    else if (o.action === "expired")
      logger.warn(`the process record ${o.file} of another pid space, untouched for 30 days, was removed`);
    else if (o.action !== "gone") logger.info(`${what}: ${o.action}`);
  }
  return outcomes;
}

/** null: our own record (this core is alive). */
async function reapFile(
  file: string,
  kind: ChildKind,
  configured: readonly string[],
  deps: Deps,
): Promise<ReapOutcome | null> {
  const r = readRecord(file, deps.uid);
  if (r instanceof NotOwnFile) return foreign(file, kind, r.uid, deps);
  if (!r) return { file, kind, action: "unreadable" };
  const pid = r.pid;
  const where = spaceOfRecord(r, deps);
  // This host's previous boot (a crash, a reboot): all its processes are gone, its pids others' now.
  if (where === "previous_boot") return { file, kind, action: "gone", pid };
  // Our space read in part, when written or now (a passing EMFILE): perhaps ours, perhaps another's.
  const partial = where === "other" && eitherPartOf(r.owner.space as string, deps.space);
  if (where === "other" && !partial) return otherSpace(file, kind, pid);
  if (ownerAlive(r, deps))
    return r.owner.pid === process.pid ? null : { file, kind, action: "owner_alive", pid };
  if (partial) return await reapIfShown(file, kind, r, configured, deps);
  if (!deps.alive(pid)) return await leaderGone(file, r, configured, "gone", memberDeps(deps));
  const now = deps.identity(pid);
  if (!now) {
    if (!deps.alive(pid)) return { file, kind, action: "gone", pid };
    return { file, kind, action: "unexplained", pid, reason: "its start time cannot be read" };
  }
  const v = await judgeAsked(r, now, configured, deps);
  if (v.verdict === "pid_reused") return await leaderGone(file, r, configured, "not_ours", memberDeps(deps));
  if (v.verdict === "unexplained") return { file, kind, action: "unexplained", pid, reason: v.reason };
  const stopped = await stopLeftover(pid, r.group === true, memberDeps(deps));
  return { file, kind, pid, ...stopped };
}

/**
 * A record of our space read in part (platform/pid-space.ts `partOf`): its llama-server stopped
 * only once shown to be the very process (alive here, its start time and program), or its leader
 * gone, a recorded group member shown so (a wrapper's shell died, its llama-server stuck), else
 * left as another space's: a pid that names nothing here, or another process, says nothing of a
 * same-named machine's. Kept as another's, its core's successors never reaped it.
 */
async function reapIfShown(
  file: string,
  kind: ChildKind,
  r: PidRecord,
  configured: readonly string[],
  deps: Deps,
): Promise<ReapOutcome> {
  if (!deps.alive(r.pid)) {
    const g = await leaderGone(file, r, configured, "gone", memberDeps(deps));
    return g.action === "stopped" || g.action === "failed" ? g : otherSpace(file, kind, r.pid);
  }
  const now = deps.identity(r.pid);
  const v = now ? await judgeAsked(r, now, configured, deps) : null;
  if (v?.verdict !== "ours") return otherSpace(file, kind, r.pid);
  return { file, kind, pid: r.pid, ...(await stopLeftover(r.pid, r.group === true, memberDeps(deps))) };
}

/** Another space's record: left, or once long untouched removed (`untouchedLong`). */
const otherSpace = (file: string, kind: ChildKind, pid: number): ReapOutcome => ({
  file,
  kind,
  pid,
  action: untouchedLong(file) ? "expired" : "other_space",
});

const memberDeps = (deps: Deps) => ({
  ...deps,
  startOf: (pid: number) => deps.identity(pid)?.start_time ?? null,
});

/**
 * Another user's record is never acted on. One whose process is gone names nothing to signal
 * (asking costs no signal): it goes, or on a file system that shows every file as another's (or
 * after a sudo core) each dead core's record stayed, a warning at every start, for good.
 */
function foreign(file: string, kind: ChildKind, uid: number, deps: Deps): ReapOutcome | null {
  const r = readRecord(file, undefined);
  if (r && !(r instanceof NotOwnFile) && spaceOfRecord(r, deps) === "previous_boot")
    return { file, kind, action: "gone", pid: r.pid };
  if (r && !(r instanceof NotOwnFile) && spaceOfRecord(r, deps) === "own") {
    // This core's own, on such a file system (a second model's start reaps again): no warning,
    // and never removed, its child gone or not, as on any other: a restart rewrites that file.
    if (r.owner.pid === process.pid && ownerAlive(r, deps)) return null;
    if (!deps.alive(r.pid)) return { file, kind, action: "gone", pid: r.pid };
  }
  return { file, kind, action: "foreign", uid };
}

/**
 * Where `r` was written (platform/pid-space.ts `writtenRelation`: a previous boot's only if written
 * before this boot began): an earlier version's record, here.
 */
const spaceOfRecord = (r: PidRecord, deps: Pick<Deps, "space">) =>
  typeof r.owner.space === "string"
    ? writtenRelation(r.owner.space, deps.space, Date.parse(r.written_at))
    : "own";

export function ownerAlive(r: PidRecord, deps: Pick<Deps, "alive" | "identity">): boolean {
  if (!deps.alive(r.owner.pid)) return false;
  // Alive under the same pid: ours only if it started when the record says (else pid reuse).
  const id = deps.identity(r.owner.pid);
  if (!id || r.owner.start_time === null) return true; // cannot tell: err on the side of not killing
  return id.start_time === r.owner.start_time;
}
