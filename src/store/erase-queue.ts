/**
 * This core's erases, one after another (each holds the write lock for seconds: store/erase-work.ts);
 * its other writes wait for them rather than fail on the lock (Store.write).
 */
export class EraseQueue {
  private last: Promise<unknown> | undefined;

  /** `run` once the erases asked before it are done. */
  add<T>(run: () => Promise<T>): Promise<T> {
    const before = this.last;
    const done = (async () => {
      if (before) await before;
      return run();
    })();
    const mark: Promise<unknown> = done.catch(() => {});
    this.last = mark;
    void mark.then(() => {
      if (this.last === mark) this.last = undefined;
    });
    return done;
  }

  /** Resolves once no erase is running (a new one may start after). */
  async idle(): Promise<void> {
    while (this.last) await this.last;
  }
}
