import { withoutArgSecrets } from "../util/arg-secrets.ts";
import type { ProcIdentity } from "./proc-info.ts";

/** The parts of a pid record (pid-file.ts) that say which process a dead core launched. */
export interface LaunchRecord {
  start_time: string;
  /** The program given to spawn: llama.binary (perhaps a wrapper script), an MCP command. */
  binary?: string;
  /** The arguments given after it. */
  argv?: string[];
}

export type Verdict =
  | { verdict: "ours" }
  /** Another process has the pid now: the recorded one is gone and the record is stale. */
  | { verdict: "pid_reused" }
  /** The recorded process lives but cannot be shown to be what we launched: leave it be. */
  | { verdict: "unexplained"; reason: string };

/**
 * Whether the live process at a recorded pid may be signalled as a dead core's child. All of:
 * - its start time is the recorded one. It is fixed at fork, so it survives a wrapper script's
 *   `exec`, and a pid cannot be reused while its process lives: the very process recorded.
 * - the record names a program this core is configured to run (`configured`), so no record,
 *   hand-written or left by another config, can aim the reaper at anything else.
 * - the process itself shows that program: its executable, argv[0] or (a script run by its
 *   interpreter) argv[1] is it, through symlinks (a bare name: a path to a file of that name);
 *   or, once a wrapper has exec'd the real program, its arguments still end with the ones we
 *   launched it with (the wrapper passed "$@" on). Records older than `binary`/`argv` get the first test only.
 * Pure: `sameFile` compares two paths through symlinks.
 */
export function judgeLeftover(
  record: LaunchRecord,
  now: ProcIdentity,
  configured: readonly string[],
  sameFile: (a: string, b: string) => boolean,
): Verdict {
  if (now.start_time !== record.start_time) return { verdict: "pid_reused" };
  const known = (path: string) => configured.some((c) => sameFile(path, c));
  if (record.binary !== undefined && !known(record.binary)) {
    return {
      verdict: "unexplained",
      reason: `it was started as ${record.binary}, which this core is not configured to run (${configured.join(", ") || "nothing"})`,
    };
  }
  const programs = record.binary !== undefined ? [record.binary] : configured;
  const argv = now.argv ?? now.cmdline.split(" ");
  const shown = shownPaths(now);
  if (shown.some((p) => programs.some((program) => shows(p, program, sameFile)))) return { verdict: "ours" };
  if (record.argv && record.argv.length > 0 && endsWithArgs(now, record.argv)) return { verdict: "ours" };
  // The reason is logged: a credential in the process's arguments (an MCP server's
  // `--api-key …`, as recorded or as it runs now) is not shown.
  const cmdline = withoutArgSecrets(now.cmdline, record.argv ?? [], argv);
  return {
    verdict: "unexplained",
    reason: `it runs \`${cmdline.slice(0, 300)}\`, which is neither ${programs.join(" nor ") || "a configured program"} nor launched with the recorded arguments`,
  };
}

/** The paths a process shows that `judgeLeftover` compares with its program: exe, argv[0], argv[1]. */
export function shownPaths(now: ProcIdentity): string[] {
  const argv = now.argv ?? now.cmdline.split(" ");
  return [now.exe, argv[0], argv[1]].filter((p): p is string => !!p);
}

/**
 * `shown` (a path the process shows) is `program`: the same file, or for a command configured by
 * bare name, a path to a file of that name. The MCP guard runs the path it found for the name
 * (agent/mcp/child.ts), so a server's argv[0] is `/usr/local/bin/srv` where the record says
 * `srv`; one with no arguments to match was otherwise judged unexplained and left running.
 */
function shows(shown: string, program: string, sameFile: (a: string, b: string) => boolean): boolean {
  if (sameFile(shown, program)) return true;
  const bare = program !== "" && !/[\\/]/.test(program);
  return bare && /[\\/]/.test(shown) && shown.split(/[\\/]/).at(-1) === program;
}

function endsWithArgs(now: ProcIdentity, args: string[]): boolean {
  if (now.argv) {
    // argv[0] is the program: the recorded arguments must come after it.
    if (now.argv.length <= args.length) return false;
    const tail = now.argv.slice(now.argv.length - args.length);
    return tail.every((a, i) => a === args[i]);
  }
  // `ps` gives one string: compare word boundaries there.
  return ` ${now.cmdline}`.endsWith(` ${args.join(" ")}`) && now.cmdline.length > args.join(" ").length;
}
