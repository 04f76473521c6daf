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
