import { MAX_TIMER_MS } from "../util/timer-limit.ts";
import type { LocalAiError } from "./errors.ts";
import type { ClientLogger, Environment, ExitInfo, SpawnFunction } from "./host-types.ts";
import type { InitializeParams } from "./types.ts";

/**
 * What a host may set when it creates a LocalAiClient (client.ts), with the defaults below; one of
 * a wrong type or out of range has start() reject with `invalid_request` (check-client-options.ts).
 */

export interface RestartOptions {
  /** Restarts allowed in a row before the client gives up (default 3). */
  maxRestarts?: number;
  /** Delay before the first restart; doubles on each further one (default 500 ms). */
  initialDelayMs?: number;
  /** Ceiling of the doubling delay (default 10 s). */
  maxDelayMs?: number;
  /**
   * A core that served this long (from its answer to initialize) resets the restart count
   * (default 60 s; at least 1000 ms, `Infinity`: never reset).
   */
  resetAfterMs?: number;
}

export interface LocalAiClientOptions {
  /** Path of the local-ai executable; a relative one resolves against `cwd` when given (as Node's spawn does), else against this process's working folder. */
  binary: string;
  /**
   * Passed as `--config FILE`; relative paths resolve against `cwd`. Left out (with `cwd` and
   * `args`), the core runs in `binary`'s folder: it reads `config.yaml` from its working folder,
   * and the host's is one it did not choose (docs/bootstrap.md, "Where the core runs").
   */
  config?: string;
  /** Replaces the whole argument list (default `serve-stdio [--config FILE]`). */
  args?: string[];
  /**
   * The core's working folder (default: the host's when `config` or `args` is given, or when
   * `binary` is a bare name found on PATH; else `binary`'s folder).
   */
  cwd?: string;
  /** The core's environment (default: this process's). */
  env?: Environment;
  /** Params of the initialize handshake run on every (re)start. */
  initialize?: InitializeParams;
  /**
   * Time limit of calls other than streams (chat, warmup, stream()); default 60 s. 0 = none,
   * except for the initialize handshake and the cancels the client sends (an abort's, a timed-out
   * chat's), which then get the default 60 s. Also how long the core may leave its stdin undrained before it is taken for hung.
   */
  requestTimeoutMs?: number;
  /** Time limit of streams (chat, warmup, stream()); default none. */
  streamTimeoutMs?: number;
  /**
   * Restart the core with back-off when it exits unexpectedly; off by default. Fields left
   * `undefined` keep their defaults (RESTART_DEFAULTS).
   */
  restart?: boolean | RestartOptions;
  /** Events held for a stream nobody reads, before new ones are dropped (default 10 000). */
  maxBufferedEvents?: number;
  /**
   * Bytes of those events (of the lines they came in) held for such a stream, before new ones are
   * dropped the same way (default 64 MiB, room for two of the longest lines, maxLineBytes).
   */
  maxBufferedBytes?: number;
  /**
   * Longest line accepted from the core (default 32 MiB: a `sessions.attachment` answer of the
   * largest image a chat takes, 20 MB, is 28 MB of base64). A longer one is dropped and the call
   * it answers fails at once with `protocol_error` (`data.line_bytes`).
   */
  maxLineBytes?: number;
  /** Lines of the core's stderr kept for error reports (default 50). */
  stderrTailLines?: number;
  /** Where the client reports what it ignores (malformed lines, late answers). Default: silent. */
  logger?: ClientLogger;
  /**
   * Every line the core writes to stderr (its logs). One over 64 KiB comes as its first 256
   * bytes (less a character the cut splits) and `… (cut: the line was N bytes, over 65536)`.
   */
  onStderr?: (line: string) => void;
  /**
   * The core process ended; `expected` is true after shutdown()/close()/kill(), and for a core
   * the client killed itself because its initialize failed. Called once the
   * calls it ended are settled. This and the other callbacks (and the logger) may throw, or
   * reject when async: the client reports it to `logger.warn` and carries on.
   */
  onExit?: (info: ExitInfo & { expected: boolean }) => void;
  /** A restart is scheduled after an unexpected exit. */
  onRestart?: (info: { attempt: number; delayMs: number }) => void;
  /**
   * The client gave up: a core stopped serving unexpectedly (exited, or was stopped mute or hung)
   * with restarts off, or the restarts ran out. No core runs and none will until start(); calls
   * fail at once with `core_exited`. `error` is the last failure. Called after that exit's onExit
   * (for a core stopped mute or hung, as it is stopped, before its exit).
   */
  onFailed?: (error: LocalAiError) => void;
  /**
   * The core's `llama.stop_grace_s`, in ms, when its config changes it (default 3000, the core's
   * default). shutdown() and close() never kill a core that is still stopping before
   * `stopGraceMs + CORE_STOP_MARGIN_MS` (10 s by default) has passed, so that llama-server and
   * the MCP servers do not outlive it. `Infinity`: never killed while it stops.
   */
  stopGraceMs?: number;
  /** Test seam: the function that starts the process (default node:child_process spawn). */
  spawn?: SpawnFunction;
}

export interface ShutdownOptions {
  /**
   * How long to wait for the core to exit before killing it (default 5 s, also for NaN or a value
   * that is not a number). It is a wish, not a
   * bound: until the core answers `shutdown` it is stopping llama-server (SIGTERM, then SIGKILL
   * after `llama.stop_grace_s`) and its MCP servers, and killing it then would leave them
   * running. So a core that has not answered yet is killed no sooner than
   * `stopGraceMs + CORE_STOP_MARGIN_MS` after the request (10 s by default) however small this
   * is; one that has answered gets at least 1 s more to exit. Use kill() to stop at once.
   */
  timeoutMs?: number;
}

/** Defaults of the options above that the client fills in itself. */
export const CLIENT_DEFAULTS = {
  requestTimeoutMs: 60_000,
  maxBufferedEvents: 10_000,
  maxBufferedBytes: 64 * 1024 * 1024,
  maxLineBytes: 32 * 1024 * 1024,
  stderrTailLines: 50,
};

/** `value` when it is a number, else `fallback`: NaN (Number() of an unset setting) included. */
export function numberOr<F extends number | undefined>(value: unknown, fallback: F): number | F {
  return typeof value === "number" && !Number.isNaN(value) ? value : fallback;
}

/**
 * The sizes the client bounds its memory by, and its time limit, each left out or not a number
 * taking its default. Given NaN, the stderr tail and the events held for a stream grew without
 * bound, the line buffer was sized NaN (the next line split across reads threw in the stdout
 * listener), and calls to a core that never answered, initialize included, waited for good.
 */
export function withNumberDefaults(options: LocalAiClientOptions): LocalAiClientOptions {
  return {
    ...options,
    requestTimeoutMs: numberOr(options.requestTimeoutMs, CLIENT_DEFAULTS.requestTimeoutMs),
    maxBufferedEvents: numberOr(options.maxBufferedEvents, CLIENT_DEFAULTS.maxBufferedEvents),
    maxBufferedBytes: numberOr(options.maxBufferedBytes, CLIENT_DEFAULTS.maxBufferedBytes),
    maxLineBytes: numberOr(options.maxLineBytes, CLIENT_DEFAULTS.maxLineBytes),
    stderrTailLines: numberOr(options.stderrTailLines, CLIENT_DEFAULTS.stderrTailLines),
  };
}

/**
 * A wait the client itself needs to end, never none: `ms` (requestTimeoutMs), but its 0 or
 * Infinity ("no limit for my calls") gives the default 60 s. Without it start() waited for good on
 * a core wedged before it read its input, and an abort on a core that never answered its cancel.
 */
export function boundedWaitMs(ms: number | undefined): number {
  const given = ms ?? CLIENT_DEFAULTS.requestTimeoutMs;
  return given > 0 && given <= MAX_TIMER_MS ? given : CLIENT_DEFAULTS.requestTimeoutMs;
}

export const RESTART_DEFAULTS: Required<RestartOptions> = {
  maxRestarts: 3,
  initialDelayMs: 500,
  maxDelayMs: 10_000,
  resetAfterMs: 60_000,
};
