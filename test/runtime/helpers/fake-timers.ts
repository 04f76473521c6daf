import type { Timers } from "../../../src/runtime/model-runtime.ts";

/** Lets every settled promise run its continuations (a few event-loop turns). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

/** A clock and timers moved only by `advance`: the scheduler's tests never wait on the wall clock. */
export class FakeTimers implements Timers {
  private t = 1_000_000;
  private nextId = 1;
  private readonly due = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.t;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.due.set(id, { at: this.t + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.due.delete(handle as number);
  }

  /** Moves the clock by `ms`, firing each timer due on the way, in order, settling after each. */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    await settle();
    for (;;) {
      const next = [...this.due.entries()]
        .filter(([, d]) => d.at <= end)
        .sort((a, b) => a[1].at - b[1].at)[0];
      if (!next) break;
      this.due.delete(next[0]);
      this.t = next[1].at;
      next[1].fn();
      await settle();
    }
    this.t = end;
    await settle();
  }
}
