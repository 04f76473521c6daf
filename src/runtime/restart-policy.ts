import { CoreError } from "../protocol/errors.ts";
import { backoffDelayMs } from "../util/backoff.ts";
import { logger } from "../util/logger.ts";
import { TAIL_IN_ERRORS } from "./launch-steps.ts";
import type { LogTail } from "./log-sink.ts";
import { RestartBudget, type RestartRate, type RestartVerdict } from "./restart-budget.ts";
import type { SupervisorSnapshot } from "./snapshot.ts";
import type { SupervisorSettings } from "./supervisor-options.ts";
import type { SupervisorState } from "./supervisor-state.ts";

const MAX_BACKOFF_MS = 30_000;

/**
 * When a failed llama-server may start again: automatic restarts as a rate
 * (`llama.max_restarts` per `llama.restart_window_s`, restart-budget.ts) with a back-off that
 * grows with each; a start the host asked for (warmup) goes at once and is not counted.
 */
export class RestartPolicy {
  private readonly budget = new RestartBudget();

  constructor(
    private readonly settings: () => SupervisorSettings,
    private readonly now: () => number,
    /** The supervisor's log tail, for the refusal's data. */
    private readonly tail: LogTail,
  ) {}

  /** The back-off before a restart, counted against the budget; throws when it is spent. */
  delay(last: CoreError, explicit: boolean): number {
    if (explicit) {
      logger.info("restarting llama-server now: the host asked (warmup)");
      return 0;
    }
    const settings = this.settings();
    const verdict = this.budget.take(restartRate(settings), this.now());
    if (!verdict.allowed) throw this.spent(last, verdict, settings);
    const delay = backoffDelayMs(verdict.attempt, settings.restartBackoffMs, MAX_BACKOFF_MS);
    logger.info(
      `restarting llama-server (restart ${verdict.attempt}/${settings.maxRestarts} within ${settings.restartWindowMs / 1000} s) in ${delay} ms`,
    );
    return delay;
  }

  /** What `status` reports of the budget, read without taking from it. */
  report(s: SupervisorState): SupervisorSnapshot["restarts"] {
    let settings: SupervisorSettings;
    try {
      settings = this.settings();
    } catch {
      // The config cannot be read (status must answer all the same): then nothing ever started.
      return { used: 0, max: null, windowMs: null, nextAutomaticTryAt: null };
    }
    const rate = restartRate(settings);
    const now = this.now();
    const pending = s.kind === "stopped" && s.restartFor !== undefined;
    const verdict = pending ? this.budget.peek(rate, now) : undefined;
    return {
      used: this.budget.used(rate, now),
      max: rate.max,
      windowMs: rate.windowMs,
      nextAutomaticTryAt: verdict && !verdict.allowed ? verdict.nextAt : null,
    };
  }

  /** The refusal a chat gets: why, and when the next automatic try will be. */
  private spent(
    last: CoreError,
    verdict: Extract<RestartVerdict, { allowed: false }>,
    settings: SupervisorSettings,
  ): CoreError {
    const windowS = settings.restartWindowMs / 1000;
    const nextTryAt = verdict.nextAt === null ? null : new Date(verdict.nextAt).toISOString();
    const retryInMs = verdict.nextAt === null ? null : Math.max(0, verdict.nextAt - this.now());
    const when =
      nextTryAt === null
        ? "automatically at all (llama.max_restarts = 0)"
        : `automatically before ${nextTryAt} (in ${Math.ceil((retryInMs as number) / 1000)} s; llama.max_restarts = ${settings.maxRestarts} per llama.restart_window_s = ${windowS})`;
    return new CoreError(
      "internal_error",
      `llama-server failed after ${verdict.used} restarts within ${windowS} s; not restarting it ${when}; a warmup tries again at once. Last failure: ${last.message}`,
      {
        restarts: verdict.used,
        next_try_at: nextTryAt,
        retry_in_ms: retryInMs,
        log_tail: this.tail.last(TAIL_IN_ERRORS),
      },
    );
  }
}

function restartRate(settings: SupervisorSettings): RestartRate {
  return { max: settings.maxRestarts, windowMs: settings.restartWindowMs };
}
