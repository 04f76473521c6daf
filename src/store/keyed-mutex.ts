import { Semaphore } from "../util/semaphore.ts";

/**
 * One holder per key at a time, in arrival order: two chats on one session run one after the
 * other. A waiter whose signal aborts leaves the line with the signal's reason. Each key is a
 * semaphore of one, forgotten once nobody holds or waits for it.
 */
export class KeyedMutex {
  private readonly locks = new Map<string, Semaphore>();

  async lock(key: string, signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    let lock = this.locks.get(key);
    if (!lock) {
      lock = new Semaphore(() => 1);
      this.locks.set(key, lock);
    }
    const owner = lock;
    try {
      const release = await owner.acquire(signal);
      return () => {
        release();
        this.forgetIfIdle(key, owner);
      };
    } catch (err) {
      this.forgetIfIdle(key, owner);
      throw err;
    }
  }

  /**
   * A place in `key`'s line taken now and waited on later (`granted`): a caller with work to do
   * first keeps its turn. `stop` ends the wait with a reason; `leave` gives the place up, or the
   * key once granted, so a caller that ends before it waited can always call it (again too).
   */
  place(key: string, signal: AbortSignal): Place {
    const left = new AbortController();
    const granted = this.lock(key, AbortSignal.any([signal, left.signal]));
    // Awaited by its caller, or left: a wait ended first is no unhandled rejection.
    granted.catch(() => {});
    return {
      granted,
      stop: (reason) => left.abort(reason),
      leave: () => {
        left.abort();
        granted.then(
          (unlock) => unlock(),
          () => {},
        );
      },
    };
  }

  /** Whether someone holds (or waits for) `key` now. */
  held(key: string): boolean {
    return this.locks.has(key);
  }

  /** Keys held or waited for now (tests check that finished keys are forgotten). */
  get size(): number {
    return this.locks.size;
  }

  private forgetIfIdle(key: string, lock: Semaphore): void {
    if (lock.idle && this.locks.get(key) === lock) this.locks.delete(key);
  }
}

/** A place in a KeyedMutex's line (`KeyedMutex.place`). */
export interface Place {
  granted: Promise<() => void>;
  stop(reason: unknown): void;
  leave(): void;
}
