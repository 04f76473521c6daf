import type { FileSink, Subprocess } from "bun";
import { defaultGroupProc, type GroupProcReader, groupLiveProbe } from "../platform/group-live.ts";
import { joinCoreJob } from "../platform/windows/job.ts";
import { allowedEnv } from "../util/child-allowlist.ts";

/**
 * The one place that starts and kills llama-server processes. The supervisor takes a
 * `Spawner` so tests could substitute it; production uses `bunSpawner`.
 */
export interface ChildProcess {
  readonly pid: number;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  /** Resolves with the exit status once the process is gone. */
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  /**
   * Whether `terminate()` is a polite signal (SIGTERM). False on Windows, where none exists and
   * it kills the tree: there the exit line of child mode is the only polite stop.
   */
  readonly politeSignal: boolean;
  /**
   * Whether it leads a process group of its own (POSIX: `bunSpawner`), which its signals reach;
   * its pid record says so, and the reaper signals that group too.
   */
  readonly group?: boolean;
  /**
   * Whether, itself reaped, members of its process group still run: a wrapper's shell that a
   * SIGTERM ended before the llama-server it started. Its `kill()` still reaches them.
   */
  groupLingers?(): boolean;
  /**
   * Writes one line to the child's stdin when it is a pipe we hold (child mode); false when it
   * is not, or the child is gone.
   */
  writeLine(line: string): boolean;
  /** Polite stop: SIGTERM on Unix. On Windows there is no polite signal, so this kills the tree. */
  terminate(): void;
  /** Hard stop, the whole process tree on Windows. */
  kill(): void;
  /** Tests: the longest a stop waits for it to be gone once killed (launch-steps.ts stopChild; default 5 s). */
  readonly killWaitMs?: number;
}

export interface SpawnRequest {
  path: string;
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  /**
   * A pipe we hold as the child's stdin (child mode): the child sees its EOF whenever this
   * process ends, a SIGKILL included, since the OS closes our end. Else stdin is /dev/null.
   */
  stdinPipe?: boolean;
}

export type Spawner = (req: SpawnRequest) => ChildProcess;

/**
 * The production spawner, with the edge that ties each llama-server to the core's Job Object
 * handed in (tests). On Windows, where child mode's stdin and libuv's job end llama-server itself
 * with the core, the job ends what it started too (RPC helpers; platform/windows/job.ts).
 * `groupProc`: what its group's probe reads of /proc (tests; platform/group-live.ts).
 */
export function bunSpawnerWith(
  joinJob: (pid: number) => boolean,
  groupProc: GroupProcReader | null = defaultGroupProc(),
): Spawner {
  return (req) => {
    const proc: Subprocess<"pipe" | "ignore", "pipe", "pipe"> = Bun.spawn([req.path, ...req.argv], {
      env: req.env,
      cwd: req.cwd,
      stdin: req.stdinPipe ? "pipe" : "ignore",
      stdout: "pipe",
      stderr: "pipe",
      // Its own process group on POSIX, so a stop reaches what a `llama.binary` wrapper that does
      // not `exec` started (`sh wrapper` → llama-server): a signal to the shell alone left that
      // llama-server running, its model's memory held, after a failed start or the core's exit.
      detached: process.platform !== "win32",
      // No console window for a GUI host on Windows.
      windowsHide: true,
    });
    joinJob(proc.pid);
    // Zombies in its group are not waited for (platform/group-live.ts).
    const groupLive = groupLiveProbe(undefined, groupProc);
    const exited = proc.exited.then(() => ({
      code: proc.exitCode,
      signal: proc.signalCode === null ? null : String(proc.signalCode),
    }));
    const killTree = () => {
      // llama-server may start helpers (RPC backends); taskkill /T takes the tree. Where taskkill
      // refuses (Wine 8 has no /T) or is missing, TerminateProcess of llama-server itself.
      let ok = false;
      try {
        ok =
          Bun.spawnSync(["taskkill", "/PID", String(proc.pid), "/T", "/F"], {
            windowsHide: true,
            env: allowedEnv(process.env),
          }).exitCode === 0;
      } catch {}
      if (!ok) proc.kill();
    };
    const stdin = req.stdinPipe ? (proc.stdin as FileSink) : undefined;
    return {
      pid: proc.pid,
      stdout: proc.stdout,
      stderr: proc.stderr,
      exited,
      politeSignal: process.platform !== "win32",
      group: process.platform !== "win32",
      groupLingers: () =>
        process.platform !== "win32" && reaped(proc) && orphanGroupAlive(proc.pid, groupLive),
      writeLine: (line) => {
        if (!stdin || proc.exitCode !== null || proc.signalCode !== null) return false;
        try {
          // What the pipe cannot take at once comes back as a promise: its EPIPE (the child gone
          // meanwhile) is answered here, never an unhandled rejection.
          for (const pending of [stdin.write(`${line}\n`), stdin.flush()])
            if (pending instanceof Promise) pending.catch(() => {});
          return true;
        } catch {
          return false; // gone meanwhile
        }
      },
      terminate: () => {
        if (process.platform === "win32") killTree();
        else safeKill(proc, "SIGTERM", groupLive);
      },
      kill: () => {
        if (process.platform === "win32") killTree();
        else safeKill(proc, "SIGKILL", groupLive);
      },
    };
  };
}

export const bunSpawner: Spawner = bunSpawnerWith((pid) => joinCoreJob(pid));

function reaped(proc: Subprocess): boolean {
  return proc.exitCode !== null || proc.signalCode !== null;
}

/**
 * Whether the group the reaped leader `pgid` led still has members that run (zombies left for a
 * slow init do not: `groupLive`). Its id cannot be another's while any member lives (the kernel
 * holds the number); a process holding that pid now is a reuse (ours is reaped), and a group it
 * leads is not ours.
 */
function orphanGroupAlive(pgid: number, groupLive: (pgid: number) => boolean): boolean {
  try {
    process.kill(pgid, 0);
    return false;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ESRCH") return false;
  }
  return groupLive(pgid);
}

/**
 * The signal to the child's process group while the child is unreaped (its pid, and so the
 * group's id, cannot be another's yet), or once reaped while the group it led still has members
 * (`orphanGroupAlive`): a wrapper's llama-server outliving the shell's SIGTERM gets the SIGKILL.
 */
function safeKill(proc: Subprocess, signal: NodeJS.Signals, groupLive: (pgid: number) => boolean): void {
  if (reaped(proc) && !orphanGroupAlive(proc.pid, groupLive)) return;
  try {
    process.kill(-proc.pid, signal);
  } catch {
    // Already gone.
  }
}

/**
 * Waits until no member of a reaped child's process group runs (`groupLingers`), or `deadline`
 * (ms, `Date.now()`): true when none is left.
 */
export async function groupEnds(
  child: Pick<ChildProcess, "groupLingers">,
  deadline: number,
): Promise<boolean> {
  while (child.groupLingers?.()) {
    if (Date.now() >= deadline) return false;
    await Bun.sleep(25);
  }
  return true;
}

/** How long `wholeExit` waits for a wrapper's group after the shell's exit (a stuck member's). */
export const GROUP_EXIT_WAIT_MS = 60_000;

/**
 * The child's exit and its group's end (launch.ts `exited`): a `llama.binary` wrapper that does
 * not `exec` dies of a stop's SIGTERM at once, its llama-server still ending the task it runs (a
 * KV save written on, which a zeroing waiting for the exit would have run under).
 */
export function wholeExit(child: ChildProcess): Promise<boolean> {
  return child.exited.then(() => groupEnds(child, Date.now() + GROUP_EXIT_WAIT_MS));
}
