import type { Release } from "./semaphore.ts";

/** A hold's release, and `lower` to give back what it took past `bytes` (they turned out fewer). */
export type BudgetHold = Release & { lower: (bytes: number) => void };

/**
 * Work that holds memory in proportion to a size, admitted while the sizes admitted together stay
 * within `max` bytes: callers are served in arrival order (none overtakes the line), and one
 * bigger than `max` alone goes when nothing else is held. A waiter whose signal aborts leaves the
 * line with the signal's reason; an already aborted signal is refused. Documents read at once
 * use it (docs/agent.md "Documents").
 */
export class ByteBudget {
  private used = 0;
  private holders = 0;
  private readonly waiters: { bytes: number; grant: () => void }[] = [];

  constructor(private readonly max: number) {}

  /** Bytes admitted now. */
  get inUse(): number {
    return this.used;
  }

  async acquire(bytes: number, signal: AbortSignal): Promise<BudgetHold> {
    signal.throwIfAborted();
    const n = Math.max(0, bytes);
    if (this.waiters.length > 0 || !this.fits(n)) {
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(signal.reason);
          // The one that left may have been what held the others back.
          this.serve();
        };
        const waiter = {
          bytes: n,
          grant: () => {
            signal.removeEventListener("abort", onAbort);
            resolve();
          },
        };
        signal.addEventListener("abort", onAbort, { once: true });
        this.waiters.push(waiter);
      });
    } else this.take(n);
    let held = n;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.used -= held;
      this.holders--;
      this.serve();
    };
    const lower = (bytes: number) => {
      if (released || bytes >= held) return;
      this.used -= held - Math.max(0, bytes);
      held = Math.max(0, bytes);
      this.serve();
    };
    return Object.assign(release, { lower });
  }

  private fits(n: number): boolean {
    return this.holders === 0 || this.used + n <= this.max;
  }

  private take(n: number): void {
    this.used += n;
    this.holders++;
  }

  private serve(): void {
    for (let w = this.waiters[0]; w && this.fits(w.bytes); w = this.waiters[0]) {
      this.waiters.shift();
      this.take(w.bytes);
      w.grant();
    }
  }
}
