/**
 * When shutdown() may kill a core that has not exited yet. The core answers `shutdown` only once
 * it has stopped llama-server (SIGTERM, then SIGKILL after `llama.stop_grace_s`) and its MCP
 * servers; killing it before that answer leaves them running. So a core still stopping gets at
 * least its stop grace plus a margin, whatever `timeoutMs` the host asked for; once it has
 * answered, only its exit is left and the host's `timeoutMs` rules again.
 */

/** The core's default `llama.stop_grace_s` (3 s), in ms: the client's default `stopGraceMs`. */
export const DEFAULT_CORE_STOP_GRACE_MS = 3000;

/**
 * The rest of the core's stop beside llama-server's grace, in ms: first the 2 s it gives work
 * `cancel` cannot reach (a `models` listing, a `plan` or `doctor` probe, an export), then its MCP
 * servers (the MCP SDK gives a hung one 2 s after end of input and 2 s more after SIGTERM), its
 * answer and its exit.
 */
export const CORE_STOP_MARGIN_MS = 7000;

/** Default `timeoutMs` of shutdown() and close(). */
export const DEFAULT_SHUTDOWN_TIMEOUT_MS = 5000;

/** After the answer the core only flushes its output and exits: this long at least. */
export const EXIT_AFTER_ANSWER_MS = 1000;

/** The least time a core that has not answered `shutdown` is given before it is killed. */
export function minShutdownWaitMs(stopGraceMs: number): number {
  return stopGraceMs + CORE_STOP_MARGIN_MS;
}

/**
 * The moment (ms since the epoch) a core asked to shut down at `startedAt` may be killed:
 * `timeoutMs` after the request, but never before minShutdownWaitMs() while it has not
 * answered (`answeredAt` undefined), nor sooner than EXIT_AFTER_ANSWER_MS after its answer.
 */
export function shutdownKillAt(p: {
  startedAt: number;
  timeoutMs: number;
  stopGraceMs: number;
  answeredAt?: number | undefined;
}): number {
  const asked = p.startedAt + Math.max(0, p.timeoutMs);
  const earliest =
    p.answeredAt === undefined
      ? p.startedAt + minShutdownWaitMs(p.stopGraceMs)
      : p.answeredAt + EXIT_AFTER_ANSWER_MS;
  return Math.max(asked, earliest);
}
