import type { Timers } from "./model-runtime.ts";
import { BEAT_MS } from "./progress-beat.ts";

/**
 * Where loads that do not fit wait for memory (scheduler.ts): told whenever memory may have been
 * freed (a chat released a model, a model stopped or failed, a load gave up). A waiter decides
 * again after each notice; the decision and the wait are one synchronous step, so no notice
 * falls between them.
 */
export class Room {
  private readonly waiters = new Set<() => void>();

  constructor(private readonly timers: Timers) {}

  notify(): void {
    const woken = [...this.waiters];
    this.waiters.clear();
    for (const w of woken) w();
  }

  /**
   * Resolves at the next notice or once `ms` have passed, whichever is first; rejects with the
   * signal's reason the moment it aborts. `beat` is called every BEAT_MS meanwhile, so a host
   * hears from a long wait at least twice a second.
   */
  wait(ms: number, signal: AbortSignal, beat: () => void): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise<void>((resolve, reject) => {
      let beatTimer: unknown;
      const end = () => {
        this.waiters.delete(wake);
        this.timers.clearTimeout(limit);
        this.timers.clearTimeout(beatTimer);
        signal.removeEventListener("abort", onAbort);
      };
      const wake = () => {
        end();
        resolve();
      };
      const onAbort = () => {
        end();
        reject(signal.reason);
      };
      const tick = () => {
        beat();
        beatTimer = this.timers.setTimeout(tick, BEAT_MS);
      };
      this.waiters.add(wake);
      const limit = this.timers.setTimeout(wake, ms);
      beatTimer = this.timers.setTimeout(tick, BEAT_MS);
      signal.addEventListener("abort", onAbort, { once: true });
    });
  }
}
