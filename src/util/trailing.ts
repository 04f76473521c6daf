/**
 * Work that goes on after the request that began it has answered (a cancelled `documents.add`'s
 * removal of the chunks it stored): its owner's stop waits for it, so a shutdown right after the
 * answer still ends it. Work handed in never rejects out of here.
 */
export class Trailing {
  private readonly running = new Set<Promise<unknown>>();

  add(work: Promise<unknown>): void {
    const tracked = work.catch(() => {});
    this.running.add(tracked);
    void tracked.then(() => this.running.delete(tracked));
  }

  /** Resolves once none is running, those added meanwhile included. */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all(this.running);
  }
}
