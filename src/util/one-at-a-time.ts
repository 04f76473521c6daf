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
 * started a second time beside it, and never given a second lane, as it holds one thread only
 * (asks in the same tick too, before its lane is granted, share the first's).
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
  // Asks waiting for a lane, by key: the call starts only once its lane is granted (a tick later
  // at the soonest), and a second ask meanwhile took a lane of its own, held on the same call.
  const queued = new Map<string, Promise<T | "late">>();
  return (key, answers, start) => {
    const shared = out.get(key) ?? queued.get(key);
    if (shared) return shared;
    const mine = answers.laned(() => once(key, start));
    queued.set(key, mine);
    const done = () => {
      if (queued.get(key) === mine) queued.delete(key);
    };
    mine.then(done, done);
    return mine;
  };
}
