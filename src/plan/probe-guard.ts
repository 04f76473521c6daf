import { accessSync, closeSync, constants, openSync, readSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { guardShellAvailable, guardShellLaunch } from "../platform/guard-shell.ts";

/**
 * A probe must not outlive the core: `llama-server --list-devices` on a GPU backend that hangs
 * while starting holds the GPU for as long as it runs, and a core that is SIGKILLed (or crashes)
 * runs neither its timeout nor `killRunningProbes`. So on POSIX a probe is started as the MCP
 * servers are (agent/mcp/guard.ts, docs/agent.md "The guard"): `/bin/sh -c GUARD
 * local-ai-probe-guard <command> <args…>` in a session of its own, so it and whatever it starts
 * share one process group. The shell forks a watcher, then `exec`s the probe, which keeps the
 * spawned pid and its pipes and gets no fd 3. The watcher lets go of the pipes and reads fd 3, a
 * socket whose other end only the core holds, until its EOF: the core closes it once the probe
 * has exited (the probe gone, it does nothing: what a probe left running is left as before), and
 * the kernel closes it when the core dies, however; then, the probe still running, it SIGKILLs
 * the group, itself included. No grace: a probe's answer is no one's any more, and one hung in a
 * driver ignores SIGTERM. The watcher ignores SIGTERM, SIGHUP and SIGINT, so that it lives to
 * send the SIGKILL. A process that leaves the group (`setsid`) is beyond it, as for MCP servers.
 * The DYLD_* variables and the probe's path are handed on as platform/guard-shell.ts says (SIP).
 */
const GUARD_SCRIPT = `(
trap '' TERM HUP INT
exec </dev/null >/dev/null 2>&1
while read -r _ <&3; do :; done
kill -0 $$ && kill -KILL 0
) &
exec 3<&-
exec "$@"`;

/** What the guard shows as its name ($0) in `ps`. */
const GUARD_NAME = "local-ai-probe-guard";

/**
 * The argv and environment that run `exe args…` with `env` under the guard (it expects fd 3 to
 * be the core's socket), or null where there is none: Windows, no /bin/sh, or `exe` not a file it
 * may run or not one the kernel runs, which is spawned as it is so that the spawn's own error
 * says so (the shell would exit 126 or 127 instead, or run a script with no #! itself).
 */
export function probeGuardArgv(
  exe: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
  platform: NodeJS.Platform = process.platform,
): { argv: string[]; env: Record<string, string> } | null {
  if (!guardShellAvailable(platform)) return null;
  try {
    if (!statSync(exe).isFile()) return null;
    accessSync(exe, constants.X_OK);
    if (!kernelRuns(exe)) return null;
  } catch {
    return null;
  }
  // Absolute: a leading "-" would be read as options, and a name without "/" looked up in PATH,
  // where spawn ran the file the stat found.
  return guardShellLaunch(GUARD_SCRIPT, GUARD_NAME, resolve(exe), args, env);
}

/** The heads the kernel runs: #!, ELF, Mach-O (32/64-bit, either byte order) and fat Mach-O. */
const EXEC_HEADS = [
  "7f454c46",
  "feedface",
  "feedfacf",
  "cefaedfe",
  "cffaedfe",
  "cafebabe",
  "bebafeca",
  "cafebabf",
  "bfbafeca",
];

/**
 * Whether `exe` starts as a file exec runs: a wrapper with no #! line fails the server's own
 * spawn (ENOEXEC), but the shell's `exec` falls back to running it as a script, so its probes
 * passed for a binary that cannot start. Anything else (binfmt_misc formats) goes unguarded.
 */
function kernelRuns(exe: string): boolean {
  const fd = openSync(exe, "r");
  try {
    const head = Buffer.alloc(4);
    const n = readSync(fd, head, 0, 4, 0);
    if (n >= 2 && head[0] === 0x23 && head[1] === 0x21) return true;
    return n === 4 && EXEC_HEADS.includes(head.toString("hex"));
  } finally {
    closeSync(fd);
  }
}
