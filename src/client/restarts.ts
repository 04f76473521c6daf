import { backoffDelayMs } from "../util/backoff.ts";
import { numberOr, RESTART_DEFAULTS, type RestartOptions } from "./client-options.ts";

/**
 * The host's restart options over the defaults. A field left `undefined` (as
 * `{ maxRestarts: settings.maxRestarts }` writes an unset one) or not a number keeps its default:
 * spread as it is, it made `maxRestarts` never spent and the delay NaN, a restart every
 * millisecond for good.
 */
export function restartOptions(given: boolean | RestartOptions): Required<RestartOptions> {
  const options = { ...RESTART_DEFAULTS };
  if (given === true || given === false) return options;
  for (const key of Object.keys(options) as (keyof RestartOptions)[]) {
    options[key] = numberOr(given[key], options[key]);
  }
  return options;
}

/**
 * Restarts of a core that exited unexpectedly, with back-off (the same doubling as the
 * supervisor's): how many were made in a row, whether any are left, and the delay before the
 * next. A core that stayed up `resetAfterMs` starts the count again.
 */
export class Restarts {
  private attempts = 0;

  constructor(private readonly options: Required<RestartOptions>) {}

  /** A fresh start by the host: no restart counts against it. */
  reset(): void {
    this.attempts = 0;
  }

  /** A serving core exited after `uptimeMs`: a long run wipes the count. */
  servedFor(uptimeMs: number): void {
    if (uptimeMs >= this.options.resetAfterMs) this.attempts = 0;
  }

  get spent(): boolean {
    return this.attempts >= this.options.maxRestarts;
  }

  /** Counts the next restart; its 1-based number and the delay to wait before it. */
  next(): { attempt: number; delayMs: number } {
    const attempt = ++this.attempts;
    return {
      attempt,
      delayMs: backoffDelayMs(attempt, this.options.initialDelayMs, this.options.maxDelayMs),
    };
  }
}
