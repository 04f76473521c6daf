/**
 * The latest send time of a task of one launch that llama-server answered (a completion, an
 * embedding): it runs its tasks in order (docs/agent.md, "The store"), so such an answer proves
 * every task queued before that send is over, a save or restore that did not answer included
 * (agent/kv/slot-clear.ts `emptyBehind`). Kept per launch: another server on the same port proves
 * nothing of this one's queue.
 */
export class TaskMarks {
  private latest = Number.NEGATIVE_INFINITY;
  private readonly waiting = new Set<{ at: number; heard: () => void }>();

  /** A task sent at `sentAt` (performance.now(), read before its send) was answered. */
  served(sentAt: number): void {
    if (sentAt > this.latest) this.latest = sentAt;
    for (const w of this.waiting) {
      if (sentAt < w.at) continue;
      this.waiting.delete(w);
      w.heard();
    }
  }

  /** Whether a task sent at `at` or later was answered. */
  since(at: number): boolean {
    return this.latest >= at;
  }

  /** True once a task sent at `at` or later is answered; false when `stop` settles first. */
  after(at: number, stop: Promise<unknown>): Promise<boolean> {
    if (this.since(at)) return Promise.resolve(true);
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const waiter = { at, heard: () => resolve(true) };
    this.waiting.add(waiter);
    void stop.finally(() => {
      this.waiting.delete(waiter);
      resolve(false);
    });
    return promise;
  }
}
