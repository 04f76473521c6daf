import { closeSync } from "node:fs";
import { killTree } from "../platform/process-tree.ts";
import { joinCoreJob } from "../platform/windows/job.ts";
import { allowedEnv } from "../util/child-allowlist.ts";
import { within } from "../util/within.ts";
import { probeGuardArgv } from "./probe-guard.ts";

export type RunResult =
  | { kind: "exit"; code: number; stdout: string; stderr: string }
  | { kind: "absent" }
  | { kind: "timeout" }
  | { kind: "error"; message: string };

/** What a probe may write to each of its pipes; past it, it is ended (a tool run wild). */
export const MAX_PROBE_OUTPUT_BYTES = 4 * 1024 * 1024;
/**
 * How long a probe's pipes may stay open after it exited: a child it started (a daemon, a
 * wrapper's leftover) may hold them for good, and its answer is what came by then.
 */
export const PIPES_AFTER_EXIT_MS = 250;

/** The kill of each probe still running: a command stopped by a signal ends them first. */
const running = new Set<() => void>();
/** A signal stopped the command: it goes on a moment before the exit, and starts no probe meanwhile. */
let stopped = false;

/**
 * Kills every probe still running, and what each started: `doctor` or `plan` stopped by Ctrl-C
 * or a script's SIGTERM left a hung `llama-server --list-devices` (a GPU backend that never
 * starts) running on its own, holding the GPU.
 */
export function killRunningProbes(): void {
  stopped = true;
  for (const kill of running) kill();
  running.clear();
}

/** The OS edge a probe starts on; tests hand in another platform and a fake job. */
export interface ProbeOs {
  platform: NodeJS.Platform;
  /** Ties an unguarded child to the core's life (platform/windows/job.ts); false where it cannot. */
  joinJob(pid: number): boolean;
}

const THIS_OS: ProbeOs = { platform: process.platform, joinJob: (pid) => joinCoreJob(pid) };

/**
 * Runs a command, killing it (and resolving `timeout`) if it outlives `timeoutMs`. Its output is
 * held to MAX_PROBE_OUTPUT_BYTES a pipe, and its exit is its answer even when something it
 * started keeps its pipes open.
 */
export async function runWithTimeout(
  cmd: string,
  args: string[],
  timeoutMs: number,
  env?: Record<string, string>,
  os: ProbeOs = THIS_OS,
): Promise<RunResult> {
  // Killed by no one once spawned: the process exits under it (a hung --list-devices left running).
  if (stopped) return { kind: "error", message: "the command was stopped by a signal" };
  const exe = cmd.includes("/") || cmd.includes("\\") ? cmd : Bun.which(cmd);
  if (!exe) return { kind: "absent" };
  // Under the guard where there is one: a core SIGKILLed mid-probe takes the probe with it.
  // Never the core's whole environment: a probe is a child too (util/child-allowlist.ts).
  const probeEnv = env ?? allowedEnv(process.env);
  const guarded = probeGuardArgv(exe, args, probeEnv, os.platform);
  let proc: ReturnType<typeof Bun.spawn>;
  try {
    proc = Bun.spawn(guarded?.argv ?? [exe, ...args], {
      stdio: ["ignore", "pipe", "pipe", ...(guarded ? (["socket-fd"] as const) : [])],
      detached: guarded !== null,
      env: guarded?.env ?? probeEnv,
      // A probe (nvidia-smi, llama-server --version) must not flash a console window on Windows.
      windowsHide: true,
    });
  } catch (err) {
    return { kind: "error", message: (err as Error).message };
  }
  // No guard (Windows): the core's Job Object ends it, and what it starts, when the core dies.
  if (!guarded) os.joinJob(proc.pid);
  // What it started too: a wrapper script's llama-server would outlive it (process-tree.ts).
  // Not once it exited: its pid is reaped and may be another process's by then (a child left on
  // its pipes can still overflow them, or the timeout fire, in the wait after the exit).
  const kill = () => {
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    if (os.platform === "win32") proc.kill("SIGKILL");
    else {
      killTree(proc.pid);
      // Guarded, it leads a group, unreaped yet: what it left double-forked is in it, though no
      // descendant, and off Linux (no /proc) killTree finds none at all.
      if (guarded) killGroup(proc.pid);
    }
  };
  running.add(kill);
  // Closed once it has exited: the guard then finds it gone and does nothing.
  const watch = proc.stdio[3];
  const exited = proc.exited.finally(() => {
    if (typeof watch === "number") closeSync(watch);
  });
  const out = collect(proc.stdout as ReadableStream<Uint8Array>, kill);
  const err = collect(proc.stderr as ReadableStream<Uint8Array>, kill);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => {
      kill();
      resolve("timeout");
    }, timeoutMs);
  });
  const finished = (async (): Promise<RunResult> => {
    const code = await exited;
    await within(Promise.all([out.done, err.done]), PIPES_AFTER_EXIT_MS, undefined);
    if (out.over || err.over)
      return { kind: "error", message: `it wrote more than ${MAX_PROBE_OUTPUT_BYTES} bytes` };
    return { kind: "exit", code, stdout: out.text(), stderr: err.text() };
  })();
  try {
    const winner = await Promise.race([finished, timedOut]);
    return winner === "timeout" ? { kind: "timeout" } : winner;
  } catch (e) {
    return { kind: "error", message: (e as Error).message };
  } finally {
    running.delete(kill);
    clearTimeout(timer);
    out.stop();
    err.stop();
  }
}

/** A pipe read as it comes, up to MAX_PROBE_OUTPUT_BYTES (`kill` past it); `stop` leaves it. */
function collect(stream: ReadableStream<Uint8Array>, kill: () => void) {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  const state = { size: 0, over: false };
  const done = (async () => {
    try {
      for (;;) {
        const { done: end, value } = await reader.read();
        if (end) return;
        if (state.size + value.byteLength > MAX_PROBE_OUTPUT_BYTES) {
          state.over = true;
          kill();
          return;
        }
        chunks.push(value);
        state.size += value.byteLength;
      }
    } catch {
      // A pipe that breaks ends what it says.
    }
  })();
  return {
    done,
    get over() {
      return state.over;
    },
    text: () => new TextDecoder().decode(Buffer.concat(chunks, state.size)),
    stop: () => void reader.cancel().catch(() => {}),
  };
}

function killGroup(pgid: number): void {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    // Gone meanwhile.
  }
}
