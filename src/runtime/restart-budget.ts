/**
 * Automatic restarts as a rate: at most `max` within any `windowMs`. A count that only ever
 * grows (or resets only after a long healthy run) wedges a desktop core for good once spent:
 * a server that is not running never runs long. With a window, the budget recovers as time
 * passes. Pure: the caller passes the clock.
 */
export interface RestartRate {
  max: number;
  windowMs: number;
}

export type RestartVerdict =
  /** `attempt` numbers this restart within the window (1-based), for the back-off. */
  | { allowed: true; attempt: number }
  /** `nextAt` is when the oldest restart leaves the window; null when restarts are off (max 0). */
  | { allowed: false; used: number; nextAt: number | null };

export class RestartBudget {
  private times: number[] = [];

  /** Restarts within the window that ends at `now`. */
  used(rate: RestartRate, now: number): number {
    this.forget(rate, now);
    return this.times.length;
  }

  /** Whether an automatic restart may happen now; records it when it may. */
  take(rate: RestartRate, now: number): RestartVerdict {
    const verdict = this.peek(rate, now);
    if (verdict.allowed) this.times.push(now);
    return verdict;
  }

  /** The verdict `take` would give, recording nothing (for status reports). */
  peek(rate: RestartRate, now: number): RestartVerdict {
    this.forget(rate, now);
    if (this.times.length < rate.max) return { allowed: true, attempt: this.times.length + 1 };
    if (rate.max <= 0) return { allowed: false, used: this.times.length, nextAt: null };
    // Enough of the oldest must leave the window that one more fits under max.
    const oldestToLeave = this.times[this.times.length - rate.max] as number;
    return { allowed: false, used: this.times.length, nextAt: oldestToLeave + rate.windowMs };
  }

  private forget(rate: RestartRate, now: number): void {
    const since = now - rate.windowMs;
    // Entries newer than `now` (the clock stepped back) stay: they are inside any window.
    this.times = this.times.filter((t) => t > since);
  }
}
