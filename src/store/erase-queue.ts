import { abortable } from "../util/abortable.ts";

/**
 * This core's erases, one after another (each holds the write lock for seconds: store/erase-work.ts);
 * its other writes wait for them rather than fail on the lock (Store.write).
 */
export class EraseQueue {
  private last: Promise<unknown> | undefined;

  /**
   * `run` once the erases asked before it are done. With `signal`, the wait for them ends when it
   * aborts (rejecting with its reason) and `run` is never called; once begun, it runs to its end.
   */
  add<T>(run: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const before = this.last;
    const done = (async () => {
      if (before) await (signal ? abortable(before, signal) : before);
      signal?.throwIfAborted();
      return run();
    })();
    // What comes after still waits for those before: one given up on lets none by them.
    const mark: Promise<unknown> = Promise.all([before, done.catch(() => {})]);
    this.last = mark;
    void mark.then(() => {
      if (this.last === mark) this.last = undefined;
    });
    return done;
  }

  /** Resolves once no erase is running (a new one may start after); rejects once `signal` aborts. */
  idle(signal?: AbortSignal): Promise<void> {
    const idle = (async () => {
      while (this.last) await this.last;
    })();
    return signal ? abortable(idle, signal) : idle;
  }
}
