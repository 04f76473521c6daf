/** Gives a permit back; a second call is a no-op, so a `finally` and an error path may both call it. */
export type Release = () => void;

interface Waiter {
  grant: () => void;
  fail: (err: unknown) => void;
}

/**
 * Up to `capacity()` holders at once, extra callers served in arrival order. A waiter whose
 * signal aborts leaves the line with the signal's reason; an already aborted signal is refused
 * even when a permit is free (a cancelled caller must not start work). The capacity is read
 * on every decision, so it may change (llama-server's slots are known only once planned).
 * llama-server's slots use it; `KeyedMutex` is one of capacity 1 per key.
 */
export class Semaphore {
  private held = 0;
  private readonly waiters: Waiter[] = [];

  constructor(private readonly capacity: () => number = () => 1) {}

  /** Permits in use now. */
  get inUse(): number {
    return this.held;
  }

  /** Callers waiting for a permit. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Free, and nobody waiting or holding: a keyed owner may forget it. */
  get idle(): boolean {
    return this.held === 0 && this.waiters.length === 0;
  }

  async acquire(signal: AbortSignal): Promise<Release> {
    signal.throwIfAborted();
    // Nobody may overtake the line: a free permit goes to the first waiter, not to a newcomer.
    if (this.waiters.length === 0 && this.held < this.capacity()) {
      this.held++;
      return this.releaser();
    }
    await new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(signal.reason);
      };
      const waiter: Waiter = {
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
        fail: (err) => {
          signal.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
    return this.releaser();
  }

  /** Every waiter leaves the line with `err` (shutting down); holders keep their permits. */
  failWaiters(err: unknown): void {
    for (const w of this.waiters.splice(0)) w.fail(err);
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held = Math.max(0, this.held - 1);
      this.grantWaiting();
    };
  }

  private grantWaiting(): void {
    while (this.waiters.length > 0 && this.held < this.capacity()) {
      this.held++;
      this.waiters.shift()?.grant();
    }
  }
}
