import { readFileSync } from "node:fs";
import { isAbsolute } from "node:path";
import { type GroupProcReader, groupLiveProbe } from "../platform/group-live.ts";
import { statFieldsOf } from "../platform/proc-stat.ts";
import { descendantsOf, linuxProc, type ProcReader } from "../platform/process-tree.ts";
import { sameFile } from "../util/same-file.ts";
import { judgeLeftover, type LaunchRecord, shownPaths, type Verdict } from "./leftover-verdict.ts";
import type { ProcIdentity } from "./proc-info.ts";

/**
 * Stopping what a dead core left running (pid-file.ts `reapLeftover`): the recorded process, with
 * its process group, or, its leader gone, the group's members as recorded.
 */

/** A member of a llama-server's process group other than its leader, as /proc showed it. */
export interface GroupMember {
  pid: number;
  /** /proc/<pid>/stat field 22: fixed at fork, so a reused pid shows another one. */
  start_time: string;
}

/** The most members a record lists (a wrapper's shell runs one llama-server, perhaps a helper). */
export const MAX_MEMBERS = 64;

/**
 * The members of the group `leader` leads, among what it started (a `llama.binary` wrapper that
 * does not `exec` runs llama-server as its child), so that a llama-server still stuck in the group
 * once its shell died can be reaped as the very process (docs/supervisor.md "Orphans"). Undefined
 * without /proc (not Linux): the record lists none and the reap works from the leader alone.
 */
export function groupMembers(
  leader: number,
  proc: ProcReader | null = process.platform === "linux" ? linuxProc : null,
): GroupMember[] | undefined {
  if (!proc) return undefined;
  return descendantsOf(leader, proc, MAX_MEMBERS * 4)
    .filter((e) => e.pgid === leader && e.pid !== leader)
    .slice(0, MAX_MEMBERS)
    .map((e) => ({ pid: e.pid, start_time: e.start }));
}

export interface StopDeps {
  graceMs: number;
  /** How long a SIGKILLed leftover is waited for. */
  killWaitMs: number;
  alive: (pid: number) => boolean;
  /** A live process's start time (procIdentity's); null once it is gone or cannot be read. */
  startOf: (pid: number) => string | null;
  kill: (pid: number, signal: NodeJS.Signals | 0) => void;
  /** A live process's group id (/proc/<pid>/stat field 5); null once it is gone or cannot be read. */
  groupOf: (pid: number) => number | null;
  /** What a group's probe reads of /proc (platform/group-live.ts); null off Linux: kill's answer alone. */
  groupProc: GroupProcReader | null;
  /** Whether a path's drive answers a stat, asked off the loop (util/drive-answers.ts). */
  driveAnswers: (path: string) => Promise<boolean>;
}

/**
 * Why the record's program cannot be compared with the configured ones now: a path of theirs
 * whose drive does not answer (a network share offline). `sameFile`'s realpath of it would block
 * the main loop for minutes, for good on a hard mount, and the core's start with it. Null: all answer.
 */
async function programLate(
  binary: string | undefined,
  configured: readonly string[],
  deps: Pick<StopDeps, "driveAnswers">,
): Promise<string | null> {
  const paths = [...(binary === undefined ? [] : [binary]), ...configured].filter((p) => isAbsolute(p));
  const answered = await Promise.all(paths.map((p) => deps.driveAnswers(p)));
  const late = paths.filter((_, i) => !answered[i]);
  if (late.length === 0) return null;
  return `the drive of ${late.join(", ")} does not answer (a network drive offline?): it cannot be told to be ours`;
}

/**
 * Whether a group's recorded program is one this core runs, as `leaderGone` decides whom it stops
 * (doctor/run-records-check.ts reports the same): `late` when a drive of the paths is silent.
 */
export async function groupProgram(
  binary: string | undefined,
  configured: readonly string[],
  deps: Pick<StopDeps, "driveAnswers">,
): Promise<{ late: string } | { ours: boolean }> {
  const late = await programLate(binary, configured, deps);
  if (late !== null) return { late };
  return { ours: binary !== undefined && configured.some((c) => sameFile(binary, c)) };
}

/**
 * `judgeLeftover` with every path it would resolve asked first, off the loop: the record's and the
 * configured programs (`programLate`), and those the live process shows (its executable, the
 * script its interpreter runs), which may lie on a share gone offline as well. One whose drive does
 * not answer is not resolved: it shows nothing, and the recorded arguments can still tell.
 */
export async function judgeAsked(
  record: LaunchRecord,
  now: ProcIdentity,
  configured: readonly string[],
  deps: Pick<StopDeps, "driveAnswers">,
): Promise<Verdict> {
  const late = await programLate(record.binary, configured, deps);
  if (late !== null) return { verdict: "unexplained", reason: late };
  // A reused pid is told by its start time alone: nothing of it is resolved, or asked.
  const shown = now.start_time === record.start_time ? shownPaths(now).filter((p) => isAbsolute(p)) : [];
  const answered = await Promise.all(shown.map((p) => deps.driveAnswers(p)));
  const dead = new Set(shown.filter((_, i) => !answered[i]));
  const v = judgeLeftover(record, now, configured, (a, b) => !dead.has(a) && !dead.has(b) && sameFile(a, b));
  if (v.verdict !== "unexplained" || dead.size === 0) return v;
  return {
    ...v,
    reason: `${v.reason}; the drive of ${[...dead].join(", ")} does not answer (a network drive offline?)`,
  };
}

/** The group id of a process, from /proc (members are recorded on Linux only); null where unread. */
export function procGroupOf(pid: number): number | null {
  try {
    const pgid = Number(statFieldsOf(readFileSync(`/proc/${pid}/stat`, "utf8"))[2]);
    return Number.isSafeInteger(pgid) ? pgid : null;
  } catch {
    return null;
  }
}

/**
 * Whether a recorded member is still the very process, in the group `leader` led: alive, its
 * recorded start time, its group that leader's id (which the kernel gives no other process while
 * a member holds it), and never this core or its parent. A record is only a file: a forged or
 * corrupted one could name any process of this user's, start time and all (anyone may read it).
 */
function sameMember(
  m: GroupMember,
  leader: number,
  deps: Pick<StopDeps, "alive" | "startOf" | "groupOf">,
): boolean {
  if (m.pid === process.pid || m.pid === process.ppid) return false;
  return deps.alive(m.pid) && deps.startOf(m.pid) === m.start_time && deps.groupOf(m.pid) === leader;
}

/**
 * The recorded members of `r`'s group (its leader gone) still the very processes (`sameMember`),
 * as the reaper finds them: doctor reports them (doctor/run-records-check.ts).
 */
export function liveMembers(
  r: { pid: number; group?: boolean; members?: readonly GroupMember[] },
  deps: Pick<StopDeps, "alive" | "startOf" | "groupOf">,
): GroupMember[] {
  return r.group ? (r.members ?? []).filter((m) => sameMember(m, r.pid, deps)) : [];
}

export type Stopped =
  | { action: "stopped"; signal: "SIGTERM" | "SIGKILL" }
  | { action: "gone" }
  | { action: "failed"; error: string };

/**
 * Signals the process, and with `group` (`PidRecord.group`) its process group, waiting for the
 * whole group: a wrapper's shell may die of the SIGTERM before its llama-server.
 */
export async function stopLeftover(pid: number, group: boolean, deps: StopDeps): Promise<Stopped> {
  try {
    const target = group ? -pid : pid;
    const alive = group ? groupRemains(deps) : deps.alive;
    deps.kill(target, "SIGTERM");
    if (await waitGone(() => !alive(pid), deps.graceMs)) return { action: "stopped", signal: "SIGTERM" };
    deps.kill(target, "SIGKILL");
    if (await waitGone(() => !alive(pid), deps.killWaitMs)) return { action: "stopped", signal: "SIGKILL" };
    return { action: "failed", error: "still alive after SIGKILL" };
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ESRCH") return { action: "gone" };
    return { action: "failed", error: String((err as Error).message) };
  }
}

/**
 * The recorded members that are still the very processes (alive, the recorded start time: never
 * a reused pid), signalled one by one: a group whose leader is gone cannot be signalled as a
 * whole, its id proven to be the one we started by nothing (a dead leader's start time cannot
 * be read). The pids that were; "gone" when none was.
 */
export async function stopMembers(
  members: readonly GroupMember[],
  leader: number,
  deps: StopDeps,
): Promise<Stopped & { pids: number[] }> {
  const same = () => members.filter((m) => sameMember(m, leader, deps));
  const pids = same().map((m) => m.pid);
  if (pids.length === 0) return { action: "gone", pids };
  const send = (signal: NodeJS.Signals) => {
    for (const m of same()) {
      try {
        deps.kill(m.pid, signal);
      } catch {
        // Gone meanwhile.
      }
    }
  };
  send("SIGTERM");
  if (await waitGone(() => same().length === 0, deps.graceMs))
    return { action: "stopped", signal: "SIGTERM", pids };
  send("SIGKILL");
  if (await waitGone(() => same().length === 0, deps.killWaitMs))
    return { action: "stopped", signal: "SIGKILL", pids };
  return { action: "failed", error: "still alive after SIGKILL", pids };
}

/**
 * The recorded process is gone (or its pid another's): a wrapper's shell that died with its
 * llama-server stuck in the group. The members recorded with it that still run, each the very
 * process (`stopMembers`), are stopped where the record's `binary` is one this core runs; else,
 * any still running, left alone with the reason to log. None left, the record is stale
 * (`action`). Records without members (off Linux, older ones) end there.
 */
export async function leaderGone<K extends string>(
  file: string,
  r: { kind?: K; pid: number; group?: boolean; binary?: string; members?: readonly GroupMember[] },
  configured: readonly string[],
  action: "gone" | "not_ours",
  deps: StopDeps,
): Promise<
  { file: string; kind: K | "llama-server"; pid: number } & (
    | { action: "gone" | "not_ours" }
    | { action: "unexplained"; reason: string }
    | (Exclude<Stopped, { action: "gone" }> & { members: number[] })
  )
> {
  const kind = r.kind ?? "llama-server";
  const stale = { file, kind, action, pid: r.pid } as const;
  // The leader's pid reused: the group it led has ended (the kernel reuses no pid that is still a
  // group's id), so no member of it runs; a process in a group of that id now is the newcomer's.
  const members = r.group && action === "gone" ? (r.members ?? []) : [];
  if (members.length === 0) return stale;
  const binary = r.binary;
  const program = await groupProgram(binary, configured, deps);
  if ("late" in program)
    return members.some((m) => sameMember(m, r.pid, deps))
      ? { file, kind, action: "unexplained", pid: r.pid, reason: program.late }
      : stale;
  if (program.ours) {
    const { pids, ...stopped } = await stopMembers(members, r.pid, deps);
    if (stopped.action === "gone") return stale;
    return { file, kind, pid: r.pid, ...stopped, members: pids };
  }
  const live = members.filter((m) => sameMember(m, r.pid, deps));
  if (live.length === 0) return stale;
  const pids = live.map((m) => m.pid).join(", ");
  const reason = `its group's members ${pids} run, started by ${binary ?? "an unnamed program"}, which this core is not configured to run`;
  return { file, kind, action: "unexplained", pid: r.pid, reason };
}

/**
 * Whether the group that the leftover (shown the very process just before) led has members left
 * that run (zombies do not: `groupLiveProbe`), and is still that group: its id is no other's while
 * a member lives, and a process at that pid once the leader was seen gone is a reuse, leading a
 * group not ours. Polled, so no start time is read again (`ps`, off Linux, blocks the loop for each).
 */
function groupRemains(deps: StopDeps): (pid: number) => boolean {
  const groupLive = groupLiveProbe(deps.kill, deps.groupProc);
  let leaderGone = false;
  return (pid) => {
    if (!leaderGone && deps.alive(pid)) return true;
    leaderGone = true;
    if (deps.alive(pid)) return false;
    return groupLive(pid);
  };
}

async function waitGone(gone: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (gone()) return true;
    await Bun.sleep(50);
  }
  return gone();
}
