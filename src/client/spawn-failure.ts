import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { statSync } from "node:fs";
import { foreignBinary } from "./foreign-binary.ts";

/**
 * Why a core could not run, in the host's words: a spawn that failed or threw, a shell that
 * refused a binary built for another machine. Used by core-process.ts.
 */

/** How the core was launched: what is told of it when it could not run. */
interface SpawnedAs {
  command: string;
  cwd?: string | undefined;
}

/**
 * A shell's words for a file it cannot run as a script: dash's `<file>: 1: Syntax error: "("
 * unexpected`, busybox's `<file>: line 1: syntax error: …`.
 */
export const DASH_REFUSAL = /: (line )?\d+: syntax error: /i;

/**
 * Why a core that exited before its first line could not run, when /bin/sh said so of a binary
 * built for another machine (Node hands such a file to it: foreign-binary.ts): bash's 126/127,
 * "cannot execute"/"not found", and dash's 2, a syntax error in the binary's bytes (Debian's and
 * Ubuntu's sh), only with its "Syntax error": 2 is the core's usage error, and a core of another
 * machine may run (Rosetta, qemu-user). The header tells the rest: a core of this machine
 * exiting so is never taken for one.
 */
export function shellRefusedForeign(
  options: SpawnedAs,
  code: number | null | undefined,
  dashRefused: boolean,
): string | undefined {
  const refused = code === 126 || code === 127 || (code === 2 && dashRefused);
  return refused ? foreignBinary(options.command, options.cwd) : undefined;
}

/** What a host is told of a spawn that failed (`spawn_error`). */
export function spawnFailure(err: NodeJS.ErrnoException, options: SpawnedAs): string {
  // Bun says ENOEXEC, Windows UNKNOWN or EFTYPE: the header says which machine it is for.
  const foreign = FILE_PROBLEMS.has(err.code ?? "") ? undefined : foreignBinary(options.command, options.cwd);
  return foreign ?? cwdProblem(err, options.cwd) ?? spawnErrorText(err);
}

/** Spawn failures that say what is wrong with the file already, whatever it is built for. */
const FILE_PROBLEMS = new Set(["ENOENT", "EACCES", "EPERM", "ENOTDIR", "ENAMETOOLONG", "ELOOP"]);

/**
 * A cwd that is no folder fails the spawn with ENOENT or ENOTDIR naming the binary (`spawn
 * /app/local-ai ENOENT`), which is there: the host went looking for the wrong file.
 */
function cwdProblem(err: NodeJS.ErrnoException, cwd: string | undefined): string | undefined {
  if (!cwd || (err.code !== "ENOENT" && err.code !== "ENOTDIR")) return undefined;
  try {
    if (statSync(cwd).isDirectory()) return undefined;
    return `${err.code}: the cwd ${cwd} is not a folder`;
  } catch {
    return `${err.code}: the cwd ${cwd} does not exist`;
  }
}

/**
 * The spawn failure with its code once: Bun's message already starts with it (`ENOENT: ENOENT: no
 * such file…` was what a host saw), Node's ends with it (`spawn /x/local-ai ENOENT`).
 */
function spawnErrorText(err: NodeJS.ErrnoException): string {
  const code = err.code ?? "error";
  return err.message.includes(code) ? err.message : `${code}: ${err.message}`;
}

/**
 * Node throws some spawn failures (ENOTDIR, ENAMETOOLONG; on Windows EFTYPE for a file that is
 * no executable, EINVAL for a .cmd) instead of emitting them, as it does ENOENT and EACCES. They
 * become the same `error` event of a process that never started, so the core_exited a host gets
 * has its spawn_error either way, and the exit is reported like any other.
 */
export function spawnOrFail(spawn: () => ChildProcess): ChildProcess {
  try {
    return spawn();
  } catch (err) {
    const child = Object.assign(new EventEmitter(), { pid: undefined, kill: () => false });
    // After wire() listens, as Node emits its own spawn errors on the next tick.
    process.nextTick(() => child.emit("error", err));
    return child as unknown as ChildProcess;
  }
}
