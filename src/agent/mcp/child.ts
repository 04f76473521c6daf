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
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  /** Writes to its stdin; rejects once that is closed. */
  write(data: string): Promise<void>;
  /** Settles once the server process has exited (its pid is no longer ours to signal). */
  readonly exited: Promise<void>;
  /**
   * The clean stop: stdin's end (servers exit on EOF), SIGTERM after EOF_GRACE_MS, SIGKILL after
   * TERM_GRACE_MS more. Resolves once it exited.
   */
  stop(): Promise<void>;
  /** At once: SIGKILL. */
  kill(): void;
}

export const EOF_GRACE_MS = 2000;
export const TERM_GRACE_MS = 2000;

/** Starts `launch`. Throws, as spawn does, for a command that cannot be run. */
export function spawnMcpServer(launch: ServerLaunch): McpChild {
  const proc = Bun.spawn([launch.command, ...launch.args], {
    env: launch.env,
    cwd: launch.cwd,
    stdio: ["pipe", "pipe", "pipe"],
    windowsHide: true,
  });
  let gone = false;
  const exited = proc.exited.then(() => {
    gone = true;
  });
  const signal = (sig: NodeJS.Signals) => {
    if (gone) return;
    try {
      proc.kill(sig);
    } catch {
      // Already gone.
    }
  };
  const endStdin = () => {
    try {
      proc.stdin.end();
    } catch {
      // Already closed.
    }
  };
  return {
    pid: proc.pid,
    stdout: proc.stdout,
    stderr: proc.stderr,
    exited,
    write: async (data) => {
      proc.stdin.write(data);
      await proc.stdin.flush();
    },
    stop: async () => {
      endStdin();
      const term = setTimeout(() => signal("SIGTERM"), EOF_GRACE_MS);
      const kill = setTimeout(() => signal("SIGKILL"), EOF_GRACE_MS + TERM_GRACE_MS);
      await exited;
      clearTimeout(term);
      clearTimeout(kill);
    },
    kill: () => signal("SIGKILL"),
  };
}
