import type { DriveAnswers } from "./drive-answers.ts";

/**
 * One call out per key, shared by whoever asks while it runs: a listing or walk of a folder on a
 * drive that hangs holds one of the runtime's few file threads until it answers, and each ask
 * again would hold another.
 */
export function oneAtATime<T>(): (key: string, start: () => Promise<T>) => Promise<T> {
  const out = new Map<string, Promise<T>>();
  return (key, start) => {
    const running = out.get(key);
    if (running) return running;
    const mine = start();
    out.set(key, mine);
    const done = () => {
      out.delete(key);
    };
    mine.then(done, done);
    return mine;
  };
}

/**
 * `oneAtATime`, the call started in the drives' lanes (util/drive-answers.ts `laned`), `late`
 * when refused or not started within the wait. Keyed by the call itself, not its wait: one whose
 * wait ended but that still hangs is waited on again (the caller bounds that wait), never
 * started a second time beside it, and never given a second lane, as it holds one thread only.
 */
export function oneLanedAtATime<T>(): (
  key: string,
  answers: DriveAnswers,
  start: () => Promise<T>,
) => Promise<T | "late"> {
  const out = new Map<string, Promise<T>>();
  const once = (key: string, start: () => Promise<T>): Promise<T> => {
    const running = out.get(key);
    if (running) return running;
    const mine = start();
    out.set(key, mine);
    const done = () => {
      if (out.get(key) === mine) out.delete(key);
    };
    mine.then(done, done);
    return mine;
  };
  return (key, answers, start) => out.get(key) ?? answers.laned(() => once(key, start));
}
