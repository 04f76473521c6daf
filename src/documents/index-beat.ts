import type { IndexProgress } from "../protocol/documents.ts";

/** Quiet this long: a quick add sends no progress at all. */
export const QUIET_MS = 500;
/** Then the latest progress this often, so a host hears at least every 500 ms (docs/protocol.md). */
export const BEAT_MS = 250;

/** A timer, injectable so the beat is tested without waiting. */
export interface Timers {
  every(ms: number, fn: () => void): () => void;
  after(ms: number, fn: () => void): () => void;
}

export const realTimers: Timers = {
  every: (ms, fn) => {
    const t = setInterval(fn, ms);
    return () => clearInterval(t);
  },
  after: (ms, fn) => {
    const t = setTimeout(fn, ms);
    return () => clearTimeout(t);
  },
};

/**
 * `index_progress` as `documents.add` sends it (docs/protocol.md "Documents"): the reader's and
 * the store's reports are many and fast, so they only update the latest; nothing is sent for the
 * first QUIET_MS, then the latest every BEAT_MS (again when nothing changed: a page that takes
 * long still shows the add is alive), until `stop`.
 */
export class IndexBeat {
  private latest: IndexProgress = { phase: "reading", done: 0, total: 0 };
  private cancel: () => void;
  private stopped = false;

  constructor(
    private readonly send: (p: IndexProgress) => void,
    timers: Timers = realTimers,
  ) {
    this.cancel = timers.after(QUIET_MS, () => {
      if (this.stopped) return;
      this.send(this.latest);
      this.cancel = timers.every(BEAT_MS, () => this.send(this.latest));
    });
  }

  update(p: IndexProgress): void {
    this.latest = p;
  }

  stop(): void {
    this.stopped = true;
    this.cancel();
  }
}
