import type { DownloadProgress } from "../protocol/pull.ts";

/**
 * Download progress: a rate over a sliding window (so a stall shows as a falling rate, not an
 * average of the whole download), and a reporter that emits on a fixed beat: often enough
 * that a host always sees motion (at least every 500 ms), seldom enough not to flood the pipe
 * (at most about 10 a second).
 */

export type ProgressPhase = DownloadProgress["phase"];

/** Bytes per second over the last `windowMs`, from (time, bytes so far) samples. */
export class RateMeter {
  private samples: { t: number; bytes: number }[] = [];

  constructor(private readonly windowMs = 3000) {}

  /** Forget the history (a restart from zero, or a new phase). */
  reset(): void {
    this.samples = [];
  }

  sample(t: number, bytes: number): void {
    const last = this.samples[this.samples.length - 1];
    if (last && bytes < last.bytes) this.samples = [];
    this.samples.push({ t, bytes });
    while (this.samples.length > 2 && this.samples[1]!.t <= t - this.windowMs) this.samples.shift();
  }

  rate(t: number): number {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (!first || !last || last === first) return 0;
    const span = Math.max(t, last.t) - first.t;
    return span > 0 ? ((last.bytes - first.bytes) * 1000) / span : 0;
  }
}

export function etaSeconds(done: number, total: number, rate: number): number | null {
  if (done >= total) return 0;
  return rate > 0 ? Math.ceil((total - done) / rate) : null;
}

/** The emit beat: every 250 ms, never two emits closer than 100 ms. */
export const PROGRESS_INTERVAL_MS = 250;
const MIN_GAP_MS = 100;

export interface ReporterOptions {
  file: string;
  part: number;
  parts: number;
  total: number;
  emit(p: DownloadProgress): void;
  now?: () => number;
}

/**
 * Reports one file's progress: `update` is called as bytes land (cheap: it only records),
 * a timer turns the latest state into events, `finish` sends the last one.
 */
export class ProgressReporter {
  private done = 0;
  private phase: ProgressPhase = "download";
  private lastEmit = Number.NEGATIVE_INFINITY;
  /** What the last event said, so `finish` does not send it again at once. */
  private sent: { done: number; phase: ProgressPhase | null } = { done: -1, phase: null };
  private readonly meter = new RateMeter();
  private readonly now: () => number;
  private timer: ReturnType<typeof setInterval> | undefined;
  /** Where the count comes from when the reporter follows it (a growing file, a hasher). */
  private source: (() => number) | undefined;

  constructor(private readonly o: ReporterOptions) {
    this.now = o.now ?? Date.now;
  }

  /** Starts (or continues) the beat; with `source`, each beat reads the count from it. */
  start(phase: ProgressPhase, done: number, source?: () => number): void {
    this.source = source;
    this.set(phase, done);
    this.tick(true);
    this.timer ??= setInterval(() => this.tick(false), PROGRESS_INTERVAL_MS);
    this.timer.unref?.();
  }

  /** Stops reading the count from the source (it is about to go away); `done` is the last count. */
  unfollow(done: number): void {
    this.source = undefined;
    this.update(done);
  }

  /**
   * The phase changes (wait → download) or the count restarts: the rate starts over. The check
   * (the hash catching up after the download) counts hashed bytes, not a transfer: it leaves
   * the download's rate as it was, for the last event once the check is over.
   */
  set(phase: ProgressPhase, done: number): void {
    const check = phase === "check" || this.phase === "check";
    if (!check && (phase !== this.phase || done < this.done)) this.meter.reset();
    this.phase = phase;
    this.update(done);
  }

  update(done: number): void {
    this.done = done;
    if (this.phase !== "check") this.meter.sample(this.now(), done);
  }

  /**
   * Keeps the beat going at `done`, following nothing: the snapshot's copy (minutes to a USB
   * drive) after a blob already in place, where no download or wait had started the beat.
   */
  hold(done: number): void {
    this.source = undefined;
    this.update(done);
    if (!this.timer) this.start(this.phase, done);
  }

  /** Emits the final state (unless an event went out just now with the same count) and stops the beat. */
  finish(): void {
    this.stop();
    this.source = undefined;
    const same = this.sent.done === this.done && this.sent.phase === this.phase;
    if (same && this.now() - this.lastEmit < MIN_GAP_MS) return;
    this.tick(true);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(force: boolean): void {
    if (this.source) this.update(this.source());
    const t = this.now();
    if (!force && t - this.lastEmit < MIN_GAP_MS) return;
    this.lastEmit = t;
    this.sent = { done: this.done, phase: this.phase };
    // Hashing a partial is not transfer: no rate, no ETA.
    const rate = this.phase === "check" ? 0 : this.meter.rate(t);
    this.o.emit({
      file: this.o.file,
      part: this.o.part,
      parts: this.o.parts,
      phase: this.phase,
      bytes_done: this.done,
      total: this.o.total,
      bytes_per_s: Math.round(rate),
      eta_s: etaSeconds(this.done, this.o.total, rate),
    });
  }
}
