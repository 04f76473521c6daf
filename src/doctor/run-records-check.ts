import { lstatSync } from "node:fs";
import { join } from "node:path";
import { findLlamaServerAsked } from "../config/find-binary-asked.ts";
import type { Config } from "../config/schema.ts";
import { eitherPartOf, pidSpace, spaceRelation } from "../platform/pid-space.ts";
import { groupProgram, judgeAsked, liveMembers, procGroupOf } from "../runtime/leftover-stop.ts";
import {
  type ChildKind,
  LLAMA_RECORD_NAME,
  llamaPrograms,
  MCP_RECORD_NAME,
  mcpDir,
  ownerAlive,
  type PidRecord,
  readRecord,
  runDir,
} from "../runtime/pid-file.ts";
import { isAlive, type ProcIdentity, procIdentity } from "../runtime/proc-info.ts";
import { drives } from "../util/drive-answers.ts";
import { namesIn } from "../util/names-in.ts";
import { once } from "../util/once.ts";
import { NotOwnFile } from "../util/read-file.ts";
import { shellWord } from "../util/shell-word.ts";
import { controlsMarked } from "../util/terminal-text.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import type { Check } from "./checks.ts";

/** The most records read (each may cost a `ps` off Linux): a run/ of thousands is counted, not read. */
export const MAX_RECORDS_READ = 200;
/**
 * The most of one record doctor reads: a record the core writes is a few hundred bytes (its
 * command line, twice), one of a long `llama.extra_args` some KiB. The reaper reads up to 8 MiB
 * (runtime/pid-file.ts), so 200 planted ones were 1.6 GB read and parsed on the core's loop
 * here; one past this is the next start's to judge, as an unreadable one is.
 */
export const MAX_RECORD_BYTES = 256 * 1024;
/** The most records named in `data.records`: the report stays small whatever run/ holds. */
const MAX_NAMED = 20;

/** Tests pose as another user, and answer for processes, their groups, programs and drives. */
export interface RunRecordsOptions {
  uid?: number;
  alive?: (pid: number) => boolean;
  identity?: (pid: number) => ProcIdentity | null;
  maxRead?: number;
  groupOf?: (pid: number) => number | null;
  /** The programs the core would run, per kind, as its reaper is given them (runtime/reap-at-startup.ts). */
  configured?: Partial<Record<ChildKind, readonly string[]>>;
  driveAnswers?: (path: string) => Promise<boolean>;
}

/**
 * `leader`: a recorded member of the group that pid led (gone), still running. `reaper`: what the
 * next start does with it (runtime/pid-file.ts `reapFile`): stops it, or leaves it running and
 * only logs why (`why`, in words of doctor's own: the reaper's reason may quote a command line).
 */
type Finding =
  | { file: string; finding: "foreign"; uid: number }
  | {
      file: string;
      finding: "leftover";
      pid: number;
      kind: string;
      leader?: number;
      reaper: "stops" | "leaves";
      why?: string;
    };
type Leftover = Extract<Finding, { finding: "leftover" }>;

type JudgeDeps = {
  alive: (pid: number) => boolean;
  identity: (pid: number) => ProcIdentity | null;
  groupOf: (pid: number) => number | null;
  configured: () => Promise<Partial<Record<ChildKind, readonly string[]>>>;
  driveAnswers: (path: string) => Promise<boolean>;
};

/**
 * `run_records` (docs/doctor.md): the pid records under data_dir/run (runtime/pid-file.ts) the
 * next start will not clear, read only: nothing signalled, removed or written. Warns about a
 * record another user wrote (the core never acts on one, so its process and the record stay for
 * good, unseen) and about a process of a dead core still running (an orphaned llama-server
 * holding its memory until the next start stops it, or for good where the start cannot prove it
 * is the one launched). A running core's records and those whose process is gone are fine.
 */
export async function runRecordsCheck(config: Config, options: RunRecordsOptions = {}): Promise<Check> {
  const dataDir = config.app.data_dir;
  const uid = options.uid ?? (process.platform === "win32" ? undefined : process.getuid?.());
  const deps: JudgeDeps = {
    alive: options.alive ?? isAlive,
    identity: options.identity ?? procIdentity,
    groupOf: options.groupOf ?? procGroupOf,
    configured: once(async () => options.configured ?? (await configuredPrograms(config).catch(() => ({})))),
    driveAnswers: options.driveAnswers ?? ((path) => drives.answers(path)),
  };
  const files = [
    ...folderNames(runDir(dataDir))
      .filter((n) => LLAMA_RECORD_NAME.test(n))
      .map((n) => join(runDir(dataDir), n)),
    ...folderNames(mcpDir(dataDir))
      .filter((n) => MCP_RECORD_NAME.test(n))
      .map((n) => join(mcpDir(dataDir), n)),
  ];
  const read = files.slice(0, options.maxRead ?? MAX_RECORDS_READ);
  const findings: Finding[] = [];
  for (const file of read) {
    // One record a turn of the loop: off Linux each costs two `ps` runs, and 200 in one turn held
    // a core's ping and cancel for seconds.
    await new Promise<void>((go) => setImmediate(go));
    findings.push(...(await judge(file, uid, deps)));
  }
  const unread = files.length - read.length;
  const foreign = findings.filter((f) => f.finding === "foreign");
  const leftover = findings.filter((f) => f.finding === "leftover");
  const data = {
    records: files.length,
    unread,
    foreign: foreign.length,
    leftover: leftover.length,
    findings: findings.slice(0, MAX_NAMED),
  };
  const more = unread > 0 ? ` (the first ${read.length} of ${files.length} read)` : "";
  if (findings.length === 0)
    return { id: "run_records", status: "ok", message: `${files.length} process record(s)${more}`, data };
  const parts = [
    ...(leftover.length > 0
      ? [
          `${leftover.length} process(es) of a core no longer running still run (${leftover
            .slice(0, 5)
            .map((f) => `${f.kind} pid ${f.pid}${f.leader ? ` (of the group pid ${f.leader} led)` : ""}`)
            .join(", ")})`,
        ]
      : []),
    ...(foreign.length > 0
      ? [`${foreign.length} record(s) written by another user, which the core leaves alone`]
      : []),
  ];
  const fixes = [
    ...leftoverFixes(leftover as Leftover[]),
    ...(foreign.length > 0
      ? [
          `that user's cores (or a core run with sudo) share ${shownDir(dataDir)}: give each user a data_dir of their own, and remove those records once their processes are gone`,
        ]
      : []),
  ];
  return {
    id: "run_records",
    status: "warn",
    message: `${parts.join("; ")}${more}`,
    fix: fixes.join("; "),
    data,
  };
}

/**
 * data_dir as a fix shows it: a host shows doctor's result as it is, so a control character of
 * the config's spelling (U+009B opens a sequence as ESC [ does) is marked `?`, as a record's
 * name is; shell-quoted, as the other checks' paths are, so a space does not split it.
 */
const shownDir = (dataDir: string) => shellWord(controlsMarked(dataDir));

/**
 * What to do about each leftover, as the reaper will treat it: "start the core once" stops only
 * those it shows to be its own; the others it logs and leaves running, for the user to stop.
 */
function leftoverFixes(leftover: Leftover[]): string[] {
  const pids = (fs: Leftover[]) =>
    `pid${fs.length > 1 ? "s" : ""} ${fs
      .slice(0, 5)
      .map((f) => f.pid)
      .join(", ")}${fs.length > 5 ? ", …" : ""}`;
  const stops = leftover.filter((f) => f.reaper === "stops");
  // Only a pid whose start time matched the record's is named to stop: another may be innocent.
  const unread = leftover.filter((f) => f.why === START_UNREAD);
  const leaves = leftover.filter((f) => f.reaper === "leaves" && f.why !== START_UNREAD);
  return [
    ...(stops.length > 0 ? [`start the core once: it stops ${pids(stops)}, shown to be its own`] : []),
    ...(leaves.length > 0
      ? [
          `stop ${pids(leaves)} yourself once sure they are leftovers: the core leaves them running (${leaves[0]?.why})`,
        ]
      : []),
    ...(unread.length > 0
      ? [
          `the start time of ${pids(unread)} cannot be read, so neither doctor nor the core can tell it is still the recorded process (the pid may be another's now): stop nothing on this report alone`,
        ]
      : []),
  ];
}

/**
 * A folder's names, none when it is a symbolic link (or no folder): the core refuses a link there
 * (data_dir's check fails it), and listing its target, on a network share gone offline, held the
 * core's loop for good. lstat asks only data_dir's drive, which has answered (doctor.ts).
 */
function folderNames(dir: string): string[] {
  try {
    if (!lstatSync(dir).isDirectory()) return [];
  } catch {
    return [];
  }
  return namesIn(dir);
}

/**
 * One record's findings, as the core's reaper judges it (runtime/pid-file.ts `reapFile`); none when
 * the next start has nothing to say about it (or clears it).
 */
async function judge(file: string, uid: number | undefined, deps: JudgeDeps): Promise<Finding[]> {
  const r = readRecord(file, uid, MAX_RECORD_BYTES);
  if (r instanceof NotOwnFile) {
    // The reaper removes another user's record whose process is gone (pid-file.ts `foreign`).
    const other = readRecord(file, undefined, MAX_RECORD_BYTES);
    if (other && !(other instanceof NotOwnFile) && !deps.alive(other.pid)) return [];
    return [{ file, finding: "foreign", uid: r.uid }];
  }
  // Unreadable: removed by the next start, naming nothing to stop.
  if (!r) return [];
  // Another pid space's (another container's or machine's core): its pids name nothing here, and
  // the reaper leaves it; this host's previous boot's: gone, the reaper removes it (pid-file.ts).
  // This space read in part (a passing EMFILE): the reaper stops its process once shown to be the
  // very one, its start time and its program (pid-file.ts `reapIfShown`), and only that is told.
  const space = typeof r.owner.space === "string" ? r.owner.space : undefined;
  const partial = space !== undefined && eitherPartOf(space, pidSpace());
  if (space !== undefined && !partial && spaceRelation(space, pidSpace()) !== "own") return [];
  if (ownerAlive(r, deps)) return [];
  if (!deps.alive(r.pid)) return await membersLeft(file, r, partial, deps);
  // Another process at the pid since (a reuse): the next start removes the record.
  const now = deps.identity(r.pid);
  if (now ? now.start_time !== r.start_time : partial) return [];
  // Not shown to be the one launched (its start time unread, another program): the reaper logs
  // it and leaves it running (pid-file.ts `reapFile`); of a record read in part, says nothing.
  const configured = (await deps.configured())[r.kind ?? "llama-server"] ?? [];
  const ours = now !== null && (await judgeAsked(r, now, configured, deps)).verdict === "ours";
  if (partial && !ours) return [];
  const base = { file, finding: "leftover", pid: r.pid, kind: kindOf(r) } as const;
  if (ours) return [{ ...base, reaper: "stops" }];
  // Its start time unread, nothing shows the pid is still the recorded process (a reused pid is
  // another's): the user is not told to stop it.
  return [{ ...base, reaper: "leaves", why: now === null ? START_UNREAD : NOT_SHOWN }];
}

const START_UNREAD = "its start time cannot be read, so it may be another process now";
const NOT_SHOWN = "it cannot be shown to be the process a core started";
const UNCONFIGURED = "its program is not one this core is configured to run";
const LATE = "its program's drive does not answer";

/**
 * The leader gone: the recorded group members still the very processes (a wrapper's shell died,
 * its llama-server stuck in the group). The reaper (runtime/leftover-stop.ts `leaderGone`) stops
 * them where the record's program is one configured, else logs them and leaves them running; of
 * a record read in part, it says nothing of those (left as another space's), nor doctor.
 */
async function membersLeft(
  file: string,
  r: PidRecord,
  partial: boolean,
  deps: JudgeDeps,
): Promise<Finding[]> {
  const live = liveMembers(r, { ...deps, startOf: (pid) => deps.identity(pid)?.start_time ?? null });
  if (live.length === 0) return [];
  const configured = (await deps.configured())[r.kind ?? "llama-server"] ?? [];
  const program = await groupProgram(r.binary, configured, deps);
  const stops = "ours" in program && program.ours;
  if (partial && !stops) return [];
  const why = "late" in program ? LATE : UNCONFIGURED;
  return live.map((m) => {
    const base = { file, finding: "leftover", pid: m.pid, kind: kindOf(r), leader: r.pid } as const;
    return stops ? { ...base, reaper: "stops" } : { ...base, reaper: "leaves", why };
  });
}

/** What the core's reaper is told it runs (runtime/reap-at-startup.ts). */
async function configuredPrograms(config: Config): Promise<Partial<Record<ChildKind, readonly string[]>>> {
  return {
    "llama-server": llamaPrograms(await findLlamaServerAsked(config)),
    mcp: config.mcp_servers.map((s) => s.command),
  };
}

/** The most of an MCP server's name shown: a record is up to MAX_RECORD_BYTES, and its name no field checked. */
const NAME_CHARS = 64;

function kindOf(r: PidRecord): string {
  if (r.kind !== "mcp") return "llama-server";
  const name = typeof r.name === "string" ? r.name : "";
  // The table escapes what it shows (doctor/render.ts); `--json` does not, and JSON.stringify
  // writes DEL and C1 controls (U+009B opens a sequence as ESC [ does) raw: none of a record's.
  const shown = controlsMarked(name.slice(0, wholeCharCut(name, NAME_CHARS)));
  return `MCP server ${shown}`.trim();
}
