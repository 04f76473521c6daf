import { closeSync, existsSync, statSync, writeSync } from "node:fs";
import { isAbsolute, posix, resolve, win32 } from "node:path";
import { MAX_DESCENDANTS, type ProcEntry, signalSame } from "../../platform/process-tree.ts";
import { joinCoreJob } from "../../platform/windows/job.ts";
import { spawnArgv } from "../../platform/windows-command.ts";
import { type DriveAnswers, drives, whyLate } from "../../util/drive-answers.ts";
import { keepLatest } from "../../util/keep-latest.ts";
import { endEscaped, escapedFrom } from "./escaped.ts";
import { guardAvailable, guardedLaunch } from "./guard.ts";

/** What the config says to run. */
export interface ServerLaunch {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd?: string;
}

/** A spawned MCP server: its stdio for the transport, and the one way to stop it. */
export interface McpChild {
  readonly pid: number;
  /** Whether the guard (guard.ts) ties its process group to the core's life. */
  readonly guarded: boolean;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  /** Writes to its stdin; rejects once that is closed. */
  write(data: string): Promise<void>;
  /** Settles once the server process has exited (its pid is no longer ours to signal), saying how. */
  readonly exited: Promise<ChildExit>;
  /**
   * The clean stop: stdin's end (servers exit on EOF), SIGTERM after EOF_GRACE_MS, SIGKILL after
   * TERM_GRACE_MS more; guarded, the signals go to its process group, and what it started outside
   * that group is ended after it (escaped.ts). Resolves once it exited and those were ended.
   */
  stop(): Promise<void>;
  /** At once: SIGKILL to it (guarded: its group, the guard included, and what left the group). */
  kill(): void;
  /**
   * Guarded, on Linux: tells the guard what the server has started outside its group so far
   * (escaped.ts), so that the guard can end it should the core die outright, even when the
   * server exits at stdin's end before the guard's own look. At most once a NOTE_EVERY_MS.
   */
  noteEscaped(): void;
}

/** How a server process ended: its exit code, or the signal that ended it. */
export interface ChildExit {
  code: number | null;
  signal: string | null;
}

/** `exited with code 3`, `was ended by SIGSEGV`: how a server's end is told in the log and to its calls. */
export function exitText(exit: ChildExit): string {
  return exit.signal ? `was ended by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** How often `noteEscaped` looks (it reads /proc): after a tool call, not after each of a burst. */
export const NOTE_EVERY_MS = 1000;
/** Lines `noteEscaped` remembers as told: two looks' worth at most (MAX_DESCENDANTS each). */
export const MAX_TOLD = 2 * MAX_DESCENDANTS;
/** What may wait for the guard's socket: far more lines than a server starts outside its group. */
const MAX_UNSENT = 64 * 1024;

export const EOF_GRACE_MS = 2000;
export const TERM_GRACE_MS = 2000;

/**
 * `spawnMcpServer` once the drives of its cwd and of a command named by path answer a stat, asked
 * off the loop (util/drive-answers.ts); throws, naming which, when one does not. The spawn stats
 * them with synchronous calls (its cwd, the command's lookup, the exec): on a network share gone
 * offline they held the whole core, ping and cancel too, at every start of the server.
 */
export async function spawnWhenAnswered(
  launch: ServerLaunch,
  signal?: AbortSignal,
  drive: DriveAnswers = drives,
  platform: NodeJS.Platform = process.platform,
): Promise<McpChild> {
  // Windows names a path with backslashes too (C:\tools\server.exe): taken for a name, never asked.
  const paths = platform === "win32" ? win32 : posix;
  const command = (platform === "win32" ? /[\\/]/ : /\//).test(launch.command)
    ? paths.resolve(launch.cwd ?? process.cwd(), launch.command)
    : undefined;
  for (const [what, path] of [
    ["cwd", launch.cwd],
    ["command", command],
  ] as const) {
    // Up to a stat's wait each, as a PATH folder (askSearched): a start closed meanwhile asks no more.
    signal?.throwIfAborted();
    if (path !== undefined && !(await drive.answers(path)))
      throw new Error(`its ${what} ${path}: ${whyLate(drive, path)}`);
  }
  if (command === undefined) await askSearched(launch, drive, platform, signal);
  // Closed while its drives were asked: spawned now, nothing would stop it.
  signal?.throwIfAborted();
  return spawnMcpServer(launch);
}

/**
 * A bare command's lookup (Bun.which in guardedCommand, cross-spawn's on Windows) stats it in
 * each folder of the server's PATH with synchronous calls: one folder on a share gone offline
 * held the whole core at the server's start. Each folder is asked first, in the lookup's order,
 * with the command's own path there (one stat per folder); on POSIX the asking stops at the
 * folder that holds it, as the lookup does, so a dead folder after it does not fail the start.
 * Windows tries other names there too (PATHEXT: `npx.cmd`), so every folder is asked. No PATH:
 * the shell's default path (the system's own folders) decides.
 */
async function askSearched(
  launch: ServerLaunch,
  drive: DriveAnswers,
  platform: NodeJS.Platform,
  signal?: AbortSignal,
): Promise<void> {
  const win = platform === "win32";
  const PATH = launch.env.PATH ?? (win ? process.env.PATH : undefined);
  if (PATH === undefined) return;
  const paths = win ? win32 : posix;
  const folders = PATH.split(win ? ";" : ":").filter(Boolean);
  for (const folder of new Set(folders.map((f) => paths.resolve(launch.cwd ?? process.cwd(), f)))) {
    const path = paths.join(folder, launch.command);
    // Up to a stat's wait a folder: a start closed meanwhile asks no more of them.
    signal?.throwIfAborted();
    const st = await drive.statOf(path);
    if (st === "late")
      throw new Error(`its command ${launch.command}, looked for in ${folder}: ${whyLate(drive, path)}`);
    // As the lookup, a file without an execute bit is passed over: the folders after it are asked.
    if (!win && st?.isFile() && (st.mode & 0o111) !== 0) return;
  }
}

/**
 * Starts `launch`, under the guard where there is one. Guarded, the server leads its own
 * process group, and once it has exited the core closes the guard's socket, so the guard sends
 * what is left of the group (the server's own children) SIGTERM, then SIGKILL. Unguarded
 * (Windows), it joins the core's Job Object (`joinJob`: platform/windows/job.ts), which ends it
 * and what it starts (a `.cmd` shim's server) when the core dies. Throws, as spawn does, for a
 * command that cannot be run.
 */
export function spawnMcpServer(
  launch: ServerLaunch,
  guard = guardAvailable(),
  joinJob: (pid: number) => boolean = (pid) => joinCoreJob(pid),
): McpChild {
  const badCwd = launch.cwd === undefined ? null : cwdProblem(launch.cwd);
  if (badCwd) throw new Error(badCwd);
  // Unguarded is Windows (or no /bin/sh): there `npx`/`uvx` are .cmd shims (platform/windows-command.ts).
  const direct = guard ? undefined : spawnArgv(launch.command, launch.args, launch);
  const { argv, env } = direct
    ? { argv: direct.argv, env: launch.env }
    : guardedLaunch(guardedCommand(launch), launch.args, launch.env);
  const proc = Bun.spawn(argv, {
    env,
    cwd: launch.cwd,
    stdio: ["pipe", "pipe", "pipe", ...(guard ? (["socket-fd"] as const) : [])],
    detached: guard,
    // No console window flashes up for a server on Windows.
    windowsHide: true,
    windowsVerbatimArguments: direct?.verbatim ?? false,
  });
  if (!guard) joinJob(proc.pid);
  const watch = guard ? proc.stdio[3] : null;
  let gone = false;
  const exited = proc.exited.then((code): ChildExit => {
    gone = true;
    // Its leftovers are the guard's now; the core never signals a group whose leader it reaped.
    if (typeof watch === "number") closeSync(watch);
    const signal = proc.signalCode;
    return signal == null ? { code, signal: null } : { code: null, signal: String(signal) };
  });
  const signal = (sig: NodeJS.Signals) => {
    if (gone) return;
    try {
      if (guard) process.kill(-proc.pid, sig);
      else proc.kill(sig);
    } catch {
      // Already gone.
    }
  };
  // Looked for while the server lives: once it has gone, what it started is init's and cannot be found.
  const lookForEscaped = () => (guard && !gone ? escapedFrom(proc.pid) : []);
  const noteEscaped = escapeNotes(watch, lookForEscaped, () => gone);
  const endStdin = () => {
    try {
      proc.stdin.end();
    } catch {
      // Already closed.
    }
  };
  return {
    pid: proc.pid,
    guarded: guard,
    stdout: proc.stdout,
    stderr: proc.stderr,
    exited,
    write: async (data) => {
      // A write the pipe cannot take at once returns a promise: its EPIPE, unawaited, was a
      // rejection no code handled, and the message was taken for sent.
      await proc.stdin.write(data);
      await proc.stdin.flush();
    },
    stop: async () => {
      const escaped = lookForEscaped();
      endStdin();
      const term = setTimeout(() => signal("SIGTERM"), EOF_GRACE_MS);
      const kill = setTimeout(() => signal("SIGKILL"), EOF_GRACE_MS + TERM_GRACE_MS);
      await exited;
      clearTimeout(term);
      clearTimeout(kill);
      await endEscaped(escaped);
    },
    noteEscaped,
    kill: () => {
      const escaped = lookForEscaped();
      signal("SIGKILL");
      signalSame(escaped, "SIGKILL");
    },
  };
}

/**
 * A guarded server's `noteEscaped`: each new process `look` finds outside its group, written to
 * the guard's socket as `pid:start`, at most once a NOTE_EVERY_MS (one asked for sooner runs then).
 * Nothing is written once the server has gone (`gone`): its socket is closed then, and the fd
 * number may be another file's. `told` is bounded (MAX_TOLD, each look's finds made the newest):
 * unbounded, a server starting a process outside its group per call grew it for its whole life;
 * cut to the last look alone, one a look missed (past MAX_DESCENDANTS) was told again when found
 * again, and the guard keeps every line. `told` and `now` are the tests'.
 */
export function escapeNotes(
  watch: unknown,
  look: () => ProcEntry[],
  gone: () => boolean,
  told = new Map<string, true>(),
  now: () => number = () => performance.now(),
): () => void {
  if (typeof watch !== "number") return () => {};
  let lookedAt = Number.NEGATIVE_INFINITY;
  let later: ReturnType<typeof setTimeout> | undefined;
  // What the socket did not take yet (its end is non-blocking): sent first next time, so that
  // no line is lost or cut in two.
  let unsent = "";
  const note = () => {
    const wait = lookedAt + NOTE_EVERY_MS - now();
    // Asked again too soon (a call right after the start): looked at once the second is up.
    if (wait > 0) {
      later ??= setTimeout(() => {
        later = undefined;
        note();
      }, wait);
      later.unref?.();
      return;
    }
    // Gone: the socket is closed, and its fd number may be another file's by now.
    if (gone()) return;
    lookedAt = now();
    for (const e of look()) {
      const line = `${e.pid}:${e.start}`;
      const known = told.has(line);
      if (!known && unsent.length > MAX_UNSENT) continue;
      keepLatest(told, line, true, MAX_TOLD);
      if (!known) unsent += `${line}\n`;
    }
    if (unsent === "") return;
    try {
      unsent = unsent.slice(writeSync(watch, unsent));
    } catch {
      // Full for now (EAGAIN: kept for the next look) or the guard is gone (EPIPE: nothing to tell).
    }
  };
  return note;
}

/**
 * The file the guard's shell is to run for `launch.command`: its absolute path, found as spawn
 * finds it. Handed on as configured, a relative path starting with "-" reached the kernel as it
 * was, which ran its #! line as `/bin/sh -tools/server` (the shell read options, exit 2), and a
 * name was looked up again by the shell, not run from the file checked here. Throws, in the
 * words spawn uses, for one that cannot be run: the shell would only say so on stderr and exit 127.
 */
function guardedCommand(launch: ServerLaunch): string {
  const { command, env } = launch;
  if (env.PATH === undefined && !command.includes("/")) return command; // the shell's default path decides
  const found = Bun.which(command, { PATH: env.PATH ?? "", cwd: launch.cwd });
  if (found) return found;
  if (!command.includes("/")) throw new Error(`Executable not found in $PATH: "${command}"`);
  const path = isAbsolute(command) ? command : resolve(launch.cwd ?? process.cwd(), command);
  throw new Error(
    existsSync(path)
      ? `EACCES: permission denied, '${command}'`
      : `ENOENT: no such file or directory, '${command}'`,
  );
}

/**
 * Why `cwd` cannot be a server's working folder, or null. Checked before the spawn, whose
 * ENOENT for a missing cwd names the program it ran instead (the guard's /bin/sh).
 */
export function cwdProblem(cwd: string): string | null {
  try {
    return statSync(cwd).isDirectory() ? null : `its cwd ${cwd} is not a folder`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return code === "ENOENT" ? `its cwd ${cwd} does not exist` : `its cwd ${cwd} cannot be used (${code})`;
  }
}
