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
