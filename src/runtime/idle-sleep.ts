import { abortable } from "../util/abortable.ts";
import { logger } from "../util/logger.ts";
import { allowed, type Transitions } from "../util/state-cell.ts";
import { timerMs } from "../util/timer-limit.ts";
import { ProgressBeat, type ProgressListener } from "./progress-beat.ts";

/**
 * llama-server's idle sleep (`--sleep-idle-seconds`, test/fixtures/llama-server/transcripts/85 and
 * 86) as the supervisor follows it, for one running server. llama-server unloads the model after N
 * seconds without a task and reloads it, transparently, for the next request that needs it;
 * `/health` stays 200 throughout, and only `GET /props` (`is_sleeping`, answered without waking it)
 * tells.
 *
 * Learned off the hot path: a timer asks `/props` once the server has been idle (no lease
 * held) for N s plus llama-server's own check interval (it looks once a second), then backs
 * off; a chat never pays for it. A lease taken while the server is known (or may be, having
 * been idle that long) to sleep wakes it first, with one request every waiting lease shares,
 * reporting `waking` progress: the chat's own request would otherwise stall for the reload
 * with nothing to show.
 *
 * A child that pushes its state (child mode, test/fixtures/llama-server/transcripts/90: `sleeping`,
 * then on a wake `loading` and `ready`) is taken at its word instead: asleep the moment it says so,
 * awake again at its `ready`, and `/props` is never asked.
 */

/** llama-server checks its idle time at least once a second (server-queue.cpp, max_wait_time). */
const CHECK_INTERVAL_MS = 1000;
/** A little over it, so the first look usually finds it asleep. */
const FIRST_LOOK_GRACE_MS = CHECK_INTERVAL_MS + 100;
const MAX_RETRY_MS = 60_000;

export interface SleepWatchOptions {
  /** `--sleep-idle-seconds` × 1000 as launched; 0: it never sleeps and nothing here runs. */
  idleMs: number;
  /** It reports its sleep and wake itself (`heard`): no looks at /props. */
  pushed?: boolean;
  /** Leases on the server now, the one count (its Launch's SlotUse), a new one already counted. */
  inUse(): number;
  /** Learned asleep: llama-server emptied every slot (the Launch clears its slot table). */
  onSleep?: () => void;
  /** GET /props `is_sleeping`; null when it did not answer in time. */
  isAsleep(): Promise<boolean | null>;
  /** A request llama-server must wake for; resolves once it has answered (the model is back). */
  rouse(signal: AbortSignal): Promise<void>;
  /** Called as a wake begins: returns the share of the model re-read since, for progress. */
  wakeMeasure?: () => () => number | undefined;
  now?: () => number;
}

export type SleepPhase = "awake" | "asleep" | "waking";

/**
 * awake → asleep (learned: a look at /props, a lease's ask, its own `sleeping`); asleep →
 * waking (a lease wakes it) | awake (its own `ready`: a request of its own woke it); waking →
 * awake (the wake was answered) | asleep (the wake failed: whether it sleeps is unknown).
 */
const PHASES: Transitions<SleepPhase> = {
  awake: ["asleep"],
  asleep: ["waking", "awake"],
  waking: ["awake", "asleep"],
};

export function canChangePhase(from: SleepPhase, to: SleepPhase): boolean {
  return allowed(PHASES, from, to);
}

export class SleepWatch {
  private phase: SleepPhase = "awake";
  private idleSince: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private retryMs = 0;
  private wake: { done: Promise<void>; beat: ProgressBeat } | undefined;
  private readonly ended = new AbortController();
  private readonly now: () => number;
  private slept = 0;
  /** No lease has arrived since it was last idle (or ready). */
  private idle = true;
  /** The lease that ended an idle period came after idleMs: the first wake asks whether it sleeps. */
  private mayBeAsleep = false;

  constructor(private readonly options: SleepWatchOptions) {
    this.now = options.now ?? Date.now;
    // llama-server's idle clock starts when its loop does: about when it became ready.
    this.idleSince = this.now();
    this.schedule();
  }

  /** asleep, waking, or awake (as last learned). */
  get state(): SleepPhase {
    return this.phase;
  }

  /** Times it was learned asleep: each sleep unloaded the slots' KV cache and the RAM prompt cache. */
  get sleeps(): number {
    return this.slept;
  }

  /** A lease was just counted in `inUse`: the one that ends an idle period notes how long it was. */
  arrived(): void {
    const { idleMs } = this.options;
    if (this.idle) this.mayBeAsleep = idleMs > 0 && this.now() - this.idleSince >= idleMs;
    this.idle = false;
    this.cancelTimer();
  }

  /**
   * A lease that `arrived` wants the server. Resolves once it is awake, waking it first when it
   * sleeps (or may: idle long enough). Call `release()` once the lease is no longer counted, also
   * when this rejects.
   */
  async lease(signal: AbortSignal, onProgress?: ProgressListener): Promise<void> {
    const { idleMs } = this.options;
    const idleLongEnough = this.mayBeAsleep;
    this.mayBeAsleep = false;
    if (idleMs <= 0) return;
    if (this.phase === "awake") {
      // A child that pushes its state has not said it sleeps: it is awake.
      if (!idleLongEnough || this.options.pushed) return;
      // It may have fallen asleep a moment ago, before the timer looked: ask (a few ms, once
      // per idle period) rather than let the chat's own request wake it unannounced.
      const asleep = await abortable(this.options.isAsleep(), signal);
      // Another lease may have learned it meanwhile, or begun the wake.
      if (this.phase === "awake") {
        if (asleep !== true) return;
        this.fellAsleep();
      }
    }
    const wake = this.wake ?? this.beginWake();
    wake.beat.add(onProgress);
    try {
      await abortable(wake.done, signal);
    } finally {
      wake.beat.delete(onProgress);
    }
  }

  release(): void {
    if (this.options.inUse() > 0) return;
    this.idle = true;
    this.idleSince = this.now();
    this.retryMs = 0;
    this.schedule();
  }

  /**
   * What the child said of itself (child mode): `sleeping` → asleep now; `ready` while asleep →
   * awake (a request of its own woke it, not our wake, which ends at its own answer).
   */
  heard(state: string): void {
    if (state === "sleeping" && this.phase === "awake") {
      this.fellAsleep();
      this.cancelTimer();
      logger.info(
        `llama-server unloaded its model after ${this.options.idleMs / 1000} s idle (it says it sleeps)`,
      );
    } else if (state === "ready" && this.phase === "asleep") {
      this.enter("awake");
      this.idleSince = this.now();
    }
  }

  /** The server stopped or died: no more looks, a wake under way gives up. */
  dispose(): void {
    this.cancelTimer();
    this.ended.abort(new Error("llama-server is gone"));
  }

  private beginWake(): { done: Promise<void>; beat: ProgressBeat } {
    this.enter("waking");
    const t0 = this.now();
    const beat = new ProgressBeat(t0, this.options.wakeMeasure?.(), this.now);
    beat.report({ phase: "waking" });
    logger.info("llama-server is asleep (llama.idle_sleep_s): waking it, the model reloads");
    const done = this.options.rouse(this.ended.signal).then(
      () => {
        this.enter("awake");
        beat.report({ phase: "ready" });
        logger.info(`llama-server woke in ${this.now() - t0} ms`);
      },
      (err) => {
        // Whether it still sleeps is unknown: the next lease asks again.
        this.enter("asleep");
        throw err;
      },
    );
    const wake = { done, beat };
    done
      .catch(() => {})
      .finally(() => {
        beat.stop();
        if (this.wake === wake) this.wake = undefined;
      });
    this.wake = wake;
    return wake;
  }

  /** The next look at /props: once idle long enough, then backing off while it stays awake. */
  private schedule(): void {
    const { idleMs } = this.options;
    if (this.options.pushed) return;
    if (idleMs <= 0 || this.options.inUse() > 0 || this.phase !== "awake" || this.ended.signal.aborted)
      return;
    const first = this.idleSince + idleMs + FIRST_LOOK_GRACE_MS - this.now();
    const delay = this.retryMs > 0 ? this.retryMs : Math.max(0, first);
    this.cancelTimer();
    // Bounded: the config's longest idle_sleep_s plus the grace is past what a timer holds.
    this.timer = setTimeout(() => void this.look(), timerMs(delay));
    this.timer.unref?.();
  }

  private async look(): Promise<void> {
    this.timer = undefined;
    if (this.options.inUse() > 0 || this.phase !== "awake" || this.ended.signal.aborted) return;
    const asleep = await this.options.isAsleep();
    if (this.options.inUse() > 0 || this.phase !== "awake" || this.ended.signal.aborted) return;
    if (asleep === true) {
      this.fellAsleep();
      logger.info(`llama-server unloaded its model after ${this.options.idleMs / 1000} s idle (asleep)`);
      return;
    }
    // Not yet (its idle clock may have started later than ours), or no answer: look again later.
    this.retryMs = Math.min(Math.max(this.retryMs * 2, CHECK_INTERVAL_MS), MAX_RETRY_MS);
    this.schedule();
  }

  private fellAsleep(): void {
    this.enter("asleep");
    this.slept++;
    this.options.onSleep?.();
  }

  /** The one way the phase changes: a change the table lacks is a bug, never a race. */
  private enter(next: SleepPhase): void {
    if (!canChangePhase(this.phase, next)) {
      throw new Error(`idle sleep: invalid phase change ${this.phase} → ${next}`);
    }
    this.phase = next;
  }

  private cancelTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
