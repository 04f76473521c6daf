import type { SchedulerProgress, Timers } from "./model-runtime.ts";
import { BEAT_MS } from "./progress-beat.ts";

/** The longest a request queued behind a waiting load goes without looking again (a backstop). */
const LOOK_AGAIN_MS = 1_000;

/**
 * Where loads that do not fit wait for memory (scheduler.ts): told whenever memory may have been
 * freed (a chat released a model, a model stopped or failed, a load gave up). A waiter decides
 * again after each notice; the decision and the wait are one synchronous step, so no notice
 * falls between them.
 */
export class Room {
  private readonly waiters = new Set<() => void>();
  /** Per load waiting for room (admission.ts): the busy models whose chats it waits to end. */
  private readonly wanted = new Map<object, { model: string; busy: readonly string[] }>();

  constructor(private readonly timers: Timers) {}

  /**
   * `load` (for `model`) waits for these busy models' chats to end: a later request for one
   * queues behind it (`ahead`), so a steady stream of chats on a loaded model cannot starve it
   * (docs/supervisor.md "What waits"). An empty list, or `unwant`, ends that.
   */
  want(load: object, model: string, busy: readonly string[]): void {
    if (busy.length === 0) this.unwant(load);
    else this.wanted.set(load, { model, busy });
  }

  /** The load waits no more (admitted, refused, cancelled): requests queued behind it decide again. */
  unwant(load: object): void {
    if (this.wanted.delete(load)) this.notify();
  }

  /** The models whose loads wait for `model`'s chats to end: a new request for it waits behind them. */
  ahead(model: string): string[] {
    return [...this.wanted.values()].filter((w) => w.busy.includes(model)).map((w) => w.model);
  }

  /**
   * A new request for `model`, loaded, waits while loads wait for its chats to end (`ahead`),
   * hearing `waiting_for_memory` naming them. Bounded by theirs: each gives up after
   * `load_wait_s`. Once they are admitted the model is being unloaded (`loaded()` false): the
   * request then loads it again as any, waiting for their room in turn.
   */
  async behind(
    model: string,
    loaded: () => boolean,
    signal: AbortSignal,
    onProgress?: (p: SchedulerProgress) => void,
  ): Promise<void> {
    const t0 = this.timers.now();
    for (let ahead = this.ahead(model); ahead.length > 0 && loaded(); ahead = this.ahead(model)) {
      const models = ahead;
      const report = () =>
        onProgress?.({ phase: "waiting_for_memory", models, elapsed_ms: this.timers.now() - t0 });
      report();
      await this.wait(LOOK_AGAIN_MS, signal, report);
    }
  }

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
