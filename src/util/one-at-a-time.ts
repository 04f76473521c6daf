import type { DriveAnswers } from "./drive-answers.ts";

/** One promise per key while it runs, shared by whoever asks meanwhile. */
class SharedByKey<T> {
  private readonly out = new Map<string, Promise<T>>();

  get(key: string): Promise<T> | undefined {
    return this.out.get(key);
  }

  run(key: string, start: () => Promise<T>): Promise<T> {
    const running = this.out.get(key);
    if (running) return running;
    const mine = start();
    this.out.set(key, mine);
    const done = () => {
      if (this.out.get(key) === mine) this.out.delete(key);
    };
    mine.then(done, done);
    return mine;
  }
}

/**
 * One call out per key, started in the drives' lanes (util/drive-answers.ts `laned`), `late` when
 * refused or not started within the wait: a listing or walk of a folder on a drive that hangs holds
 * one of the runtime's few file threads until it answers, and each ask again would hold another.
 * Keyed by the call itself, not its wait: one whose wait ended but that still hangs is waited on
 * again (the caller bounds that wait), never started a second time beside it, and never given a
 * second lane. Asks waiting for a lane are shared too: the call starts only once its lane is
 * granted (a tick later at the soonest), and a second ask meanwhile took a lane of its own.
 */
export function oneLanedAtATime<T>(): (
  key: string,
  answers: DriveAnswers,
  start: () => Promise<T>,
) => Promise<T | "late"> {
  const running = new SharedByKey<T>();
  const queued = new SharedByKey<T | "late">();
  return (key, answers, start) =>
    running.get(key) ?? queued.run(key, () => answers.laned(() => running.run(key, start)));
}
