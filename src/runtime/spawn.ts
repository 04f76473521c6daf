import type { Subprocess } from "bun";

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
  /** Polite stop: SIGTERM on Unix. On Windows there is no polite signal, so this kills the tree. */
  terminate(): void;
  /** Hard stop, the whole process tree on Windows. */
  kill(): void;
}

export interface SpawnRequest {
  path: string;
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
}

export type Spawner = (req: SpawnRequest) => ChildProcess;

export const bunSpawner: Spawner = (req) => {
  const proc: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn([req.path, ...req.argv], {
    env: req.env,
    cwd: req.cwd,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    // No console window for a GUI host on Windows.
    windowsHide: true,
  });
  const exited = proc.exited.then(() => ({
    code: proc.exitCode,
    signal: proc.signalCode === null ? null : String(proc.signalCode),
  }));
  const killTree = () => {
    // llama-server may start helpers (RPC backends); taskkill /T takes the tree.
    Bun.spawnSync(["taskkill", "/PID", String(proc.pid), "/T", "/F"], { windowsHide: true });
  };
  return {
    pid: proc.pid,
    stdout: proc.stdout,
    stderr: proc.stderr,
    exited,
    terminate: () => {
      if (process.platform === "win32") killTree();
      else safeKill(proc, "SIGTERM");
    },
    kill: () => {
      if (process.platform === "win32") killTree();
      else safeKill(proc, "SIGKILL");
    },
  };
};

function safeKill(proc: Subprocess, signal: NodeJS.Signals): void {
  try {
    proc.kill(signal);
  } catch {
    // Already gone.
  }
}
