import { lstatSync, lutimesSync } from "node:fs";
import { NotOwnFile, readSmallFile } from "../util/read-file.ts";
import { type GroupMember, MAX_MEMBERS } from "./leftover-stop.ts";

// A process record (pid-file.ts): its shape, and reading it back, checked field by field.

export type ChildKind = "llama-server" | "mcp";

export interface PidRecord {
  /** Absent in records from before MCP servers were recorded: a llama-server. */
  kind?: ChildKind;
  /** The MCP server's name in the config. */
  name?: string;
  pid: number;
  start_time: string;
  /** As read when written; a wrapper that `exec`s shows another one later. */
  cmdline: string;
  /** What was given to spawn: the program and its arguments (absent in older records). */
  binary?: string;
  argv?: string[];
  port?: number;
  /**
   * Started leading a process group of its own (spawn.ts): the reaper signals the group, so a
   * wrapper's llama-server goes with it. A group leader keeps its group for life, so once the
   * start time shows the very process, the group is its.
   */
  group?: boolean;
  /**
   * The group's other members when written (Linux; leftover-stop.ts `groupMembers`): a wrapper's
   * llama-server left in the group after its shell died is reaped by its own start time.
   */
  members?: GroupMember[];
  /**
   * `space`: its pid space (platform/pid-space.ts), absent in earlier records. Another space's
   * record (another container's or machine's core on this data folder) names pids that are not
   * ours: its owner looked dead here and its record went, its child unreaped once that core died.
   */
  owner: { pid: number; start_time: string | null; space?: string };
  written_at: string;
}

/**
 * A record's text: a small regular file only, non-blocking, never through a link (a FIFO at its
 * name, in a run folder another user made first, blocked the core's start for good).
 */
export const readRecordText = (file: string) => readSmallFile(file, RECORD_BYTES, { follow: false });
/** The most of a record read: past any command line the OS takes (2 MiB on Linux), twice (cmdline, argv). */
const RECORD_BYTES = 8 * 2 ** 20;

export function readRecord(
  file: string,
  owner: number | undefined,
  maxBytes = RECORD_BYTES,
): PidRecord | NotOwnFile | null {
  try {
    const r = JSON.parse(readSmallFile(file, maxBytes, { follow: false, owner })) as PidRecord;
    if (!isPid(r.pid) || typeof r.start_time !== "string" || typeof r.cmdline !== "string") return null;
    // The owner, a core, is only looked at, never signalled: pid 1 is a container's core's.
    if (!r.owner || !(Number.isSafeInteger(r.owner.pid) && r.owner.pid >= 1)) return null;
    if (r.binary !== undefined && typeof r.binary !== "string") return null;
    if (r.group !== undefined && typeof r.group !== "boolean") return null;
    if (r.members !== undefined && !validMembers(r.members)) return null;
    if (r.argv !== undefined && !(Array.isArray(r.argv) && r.argv.every((a) => typeof a === "string")))
      return null;
    return r;
  } catch (err) {
    return err instanceof NotOwnFile ? err : null;
  }
}

function validMembers(m: unknown): boolean {
  return (
    Array.isArray(m) &&
    m.length <= MAX_MEMBERS &&
    m.every((e) => isPid((e as GroupMember)?.pid) && typeof (e as GroupMember).start_time === "string")
  );
}

/**
 * A process's own pid: 0 and negative numbers name process groups to kill(2) (-1: every process
 * the user may signal), 1 is init; none of them is a child a core launched.
 */
function isPid(n: unknown): n is number {
  return Number.isSafeInteger(n) && (n as number) > 1;
}

/**
 * How long a record of another pid space is kept untouched (its file's time: written at its
 * server's start and once ready): a container or machine that never comes back left its records
 * for good, each logged at every start (docs/supervisor.md). Only the file goes, nothing is
 * signalled; its writer's clock against ours is off by far less than this.
 */
export const OTHER_SPACE_KEEP_MS = 30 * 86_400_000;

/** A file time further ahead of our clock than this was set by a clock stepped back since, or a share's ahead. */
const AHEAD_MS = 86_400_000;

/**
 * The most a file time ahead is set back to ours: were ours the clock behind (a machine without a
 * working clock before its network time) by this or more, a live core's record set to our now read
 * as 30 days untouched once ours was put right, removed before its core's daily renewal.
 */
const RESET_MAX_MS = 28 * 86_400_000;

/** Files whose time was ahead and not set back: when this core first saw each so, on its monotonic clock (bounded). */
const aheadSeen = new Map<string, { mtimeMs: number; at: number }>();

/**
 * Whether `file` was last written more than `OTHER_SPACE_KEEP_MS` ago; false where unread. A time
 * over a day ahead of ours (our clock stepped back, a share's clock ahead) never came within 30
 * days of now, its record kept for good: its time is set to now, so it counts from when a core
 * first saw it so, across restarts (never through a link); where that fails, or it is ahead by
 * `RESET_MAX_MS` or more, from when this core did, on its monotonic clock (a clock put right
 * later is no 30 days gone). Its core, if alive, renews it daily (own-records.ts), a touch.
 */
export function untouchedLong(file: string, now = Date.now(), mono = performance.now()): boolean {
  try {
    const { mtimeMs } = lstatSync(file);
    if (mtimeMs - now <= AHEAD_MS) return now - mtimeMs > OTHER_SPACE_KEEP_MS;
    if (mtimeMs - now < RESET_MAX_MS && setToNow(file, now)) return false;
    return mono - firstSeenAhead(file, mtimeMs, mono) > OTHER_SPACE_KEEP_MS;
  } catch {
    return false;
  }
}

function setToNow(file: string, now: number): boolean {
  try {
    lutimesSync(file, now / 1000, now / 1000);
    aheadSeen.delete(file);
    return true;
  } catch {
    return false;
  }
}

function firstSeenAhead(file: string, mtimeMs: number, mono: number): number {
  const was = aheadSeen.get(file);
  if (was?.mtimeMs === mtimeMs) return was.at;
  if (aheadSeen.size >= 1024) aheadSeen.delete(aheadSeen.keys().next().value as string);
  aheadSeen.set(file, { mtimeMs, at: mono });
  return mono;
}
