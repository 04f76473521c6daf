/**
 * One holder per key at a time, in arrival order: two chats on one session run one after the
 * other. A waiter whose signal aborts leaves the line with the signal's reason.
 */
export class KeyedMutex {
  private readonly tails = new Map<string, Promise<void>>();

  async lock(key: string, signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    const cleanup = () => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
    let released = false;
    const unlock = () => {
      if (released) return;
      released = true;
      release();
      void tail.then(cleanup);
    };
    let onAbort: (() => void) | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        onAbort = () => reject(signal.reason);
        signal.addEventListener("abort", onAbort, { once: true });
        previous.then(resolve);
      });
    } catch (err) {
      // Give our place in line to the next waiter as soon as our predecessor finishes.
      unlock();
      throw err;
    } finally {
      if (onAbort) signal.removeEventListener("abort", onAbort);
    }
    return unlock;
  }
}
