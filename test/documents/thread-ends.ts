import { spyOn } from "bun:test";

/**
 * How each PDF thread (a Worker) was first ended: with the answers it had sent by then (`page`,
 * `done`, `error`). A cancel that ends a read mid-page ends its thread before the page's answer;
 * one that waited for the page ends it after. Observed by order, not by how long the cancel took
 * (the thread's end may be heard late on a loaded machine). Listens to each thread from the
 * moment it is handed its bytes.
 */
export function threadEnds(): { ends: string[][] } & Disposable {
  const heard = new WeakMap<Worker, string[]>();
  const ended = new WeakSet<Worker>();
  const ends: string[][] = [];
  const post = Worker.prototype.postMessage;
  const terminate = Worker.prototype.terminate;
  const posts = spyOn(Worker.prototype, "postMessage").mockImplementation(function (
    this: Worker,
    ...args: unknown[]
  ) {
    if (!heard.has(this)) {
      const kinds: string[] = [];
      heard.set(this, kinds);
      this.addEventListener("message", (e) => kinds.push((e as MessageEvent<{ kind: string }>).data.kind));
    }
    return (post as (...a: unknown[]) => void).apply(this, args);
  });
  const terminates = spyOn(Worker.prototype, "terminate").mockImplementation(function (this: Worker) {
    if (!ended.has(this)) {
      ended.add(this);
      ends.push([...(heard.get(this) ?? [])]);
    }
    return terminate.call(this);
  });
  return {
    ends,
    [Symbol.dispose]: () => {
      posts.mockRestore();
      terminates.mockRestore();
    },
  };
}
