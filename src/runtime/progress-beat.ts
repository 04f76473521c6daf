import type { StartProgress } from "./start-progress.ts";

/** A progress event before the beat stamps it: elapsed_ms (and fraction) are the beat's. */
export type Unstamped = StartProgress extends infer P
  ? P extends StartProgress
    ? Omit<P, "elapsed_ms" | "fraction">
    : never
  : never;

export type ProgressListener = (p: StartProgress) => void;

/** How often the current phase is repeated while nothing new happens (the promise is 500 ms). */
export const BEAT_MS = 250;

/**
 * The progress of one wait (a start, a wake, a restart's back-off) as its listeners hear it:
 * every phase as it is reported, stamped with the time since the wait began and, for loading
 * and waking, the share of the model taken in so far; then the current phase again every
 * BEAT_MS until the next, so a host hears from a long load at least twice a second. A listener
 * that joins late hears the current phase at once.
 */
export class ProgressBeat {
  private readonly listeners = new Set<ProgressListener>();
  private current: Unstamped | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    /** Clock time the wait began. */
    private readonly t0: number,
    /** The share of the model taken in, for loading and waking; undefined when unknown. */
    private readonly measure: () => number | undefined = () => undefined,
    private readonly now: () => number = Date.now,
    private readonly periodMs = BEAT_MS,
  ) {}

  add(listener: ProgressListener | undefined): void {
    if (!listener || this.listeners.has(listener)) return;
    this.listeners.add(listener);
    if (this.current && !this.stopped) deliver(listener, this.stamp(this.current));
  }

  /** The phase its listeners last heard (a late listener hears it at once). */
  get phase(): Unstamped["phase"] | undefined {
    return this.current?.phase;
  }

  delete(listener: ProgressListener | undefined): void {
    if (listener) this.listeners.delete(listener);
  }

  report(p: Unstamped): void {
    if (this.stopped) return;
    // The same phase again (a step that reports it on its own clock): the beat already
    // repeats it, so it is not sent twice in a row.
    const same = this.current !== undefined && sameFields(this.current, p);
    this.current = p;
    if (!same || !this.timer) this.send();
  }

  /** The wait is over (ready, failed or abandoned): no more beats. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private send(): void {
    if (this.timer) clearTimeout(this.timer);
    const current = this.current as Unstamped;
    const p = this.stamp(current);
    for (const l of this.listeners) deliver(l, p);
    if (current.phase === "ready") return;
    this.timer = setTimeout(() => this.send(), this.periodMs);
    // A beat never keeps the core alive on its own.
    this.timer.unref?.();
  }

  private stamp(p: Unstamped): StartProgress {
    const elapsed_ms = Math.max(0, this.now() - this.t0);
    if (p.phase !== "loading" && p.phase !== "waking") return { ...p, elapsed_ms } as StartProgress;
    const fraction = this.measure();
    return fraction === undefined ? { ...p, elapsed_ms } : { ...p, elapsed_ms, fraction: round3(fraction) };
  }
}

function sameFields(a: Unstamped, b: Unstamped): boolean {
  const keys = (o: object) => Object.keys(o).filter((k) => k !== "elapsed_ms" && k !== "fraction");
  const ka = keys(a);
  return (
    ka.length === keys(b).length &&
    ka.every((k) => (a as Record<string, unknown>)[k] === (b as Record<string, unknown>)[k])
  );
}

function deliver(listener: ProgressListener, p: StartProgress): void {
  try {
    listener(p);
  } catch {
    // A listener's failure is its own.
  }
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
