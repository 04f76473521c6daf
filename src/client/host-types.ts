/**
 * The client's public types that touch the host's runtime, written out so that the client's
 * declarations need neither @types/node nor the DOM library: Node's and Electron's own values
 * (process.env, an AbortController's signal, child_process.spawn) fit them as they are.
 */

/** An environment for the core, as `process.env` is. */
export type Environment = Record<string, string | undefined>;

/** What the client uses of an AbortSignal; Node's and the DOM's fit. */
export interface AbortSignalLike {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

export interface ClientLogger {
  warn(message: string): void;
  debug?(message: string): void;
}

export interface CallOptions {
  /**
   * Overrides the client's default time limit for this call; 0 = none. A negative one (a deadline
   * already past) fails the call at once with `timeout`, unsent.
   */
  timeoutMs?: number;
  /** Aborting cancels the call (a chat is cancelled on the core's side). */
  signal?: AbortSignalLike;
}

/** How the core process ended. */
export interface ExitInfo {
  code: number | null;
  /** The signal that ended it (e.g. "SIGKILL"). */
  signal: string | null;
  /** Set when the process could not be started at all (ENOENT, EACCES…). */
  spawnError?: string;
  /** The last lines the core wrote to stderr: its logs say why it stopped. */
  stderrTail: string[];
}

/** The options the client spawns the core with. */
export interface CoreSpawnOptions {
  cwd?: string;
  env?: Environment;
  stdio: ["pipe", "pipe", "pipe"];
  windowsHide: boolean;
}

/**
 * Starts the core: `child_process.spawn` by default. A replacement (a test seam) must return
 * what spawn returns, a ChildProcess with piped stdio.
 */
export type SpawnFunction = (command: string, args: string[], options: CoreSpawnOptions) => unknown;
