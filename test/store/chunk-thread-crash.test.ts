import { expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { ChunkThread, THREAD_STOPPED } from "../../src/store/chunk-thread.ts";

/** A worker that takes each ask and never answers; the test ends it as Bun does (an `error`, or `close` on exit). */
class SilentWorker extends EventTarget {
  onmessage: unknown = null;
  onerror: ((event: ErrorEvent) => void) | null = null;
  asked = 0;
  postMessage() {
    this.asked++;
  }
  terminate() {}
  unref() {}
}

const problemOf = (err: unknown) => (err instanceof CoreError ? err.data?.problem : (err as Error).message);

// A thread that exited without answering (no `error` event) left the store's migration, and every
// chat, sessions.* and users.delete waiting on it, pending forever; one that crashed was a plain
// Error, "see the core's log" for the host and its stack in the log.
test("a thread that exits or crashes with work unanswered fails it, named", async () => {
  let worker = new SilentWorker();
  const thread = new ChunkThread("/nowhere/local-ai.db", 0, undefined, () => worker as unknown as Worker);
  const opened = thread.openAhead("/nowhere", false).catch(problemOf);
  expect(worker.asked).toBe(1);
  worker.dispatchEvent(new Event("close"));
  expect(await opened).toBe(THREAD_STOPPED);
  expect(thread.running).toBe(false);

  worker = new SilentWorker();
  const again = thread.openAhead("/nowhere", false).catch(problemOf);
  expect(worker.asked).toBe(1);
  worker.onerror?.(Object.assign(new Event("error"), { message: "boom" }) as ErrorEvent);
  expect(await again).toBe(THREAD_STOPPED);
});

// A worker that cannot be made (the system out of threads): the raw error reached every method
// waiting on the store's migration, a generic internal_error with its stack in the log, and
// migrate-first.ts never took its one try on the loop. Named as a thread that stopped unanswered.
test("a thread that cannot be started fails its work, named, and the next ask tries again", async () => {
  let fails = true;
  const thread = new ChunkThread("/nowhere/local-ai.db", 0, undefined, () => {
    if (fails) throw new Error("Worker creation failed");
    return new SilentWorker() as unknown as Worker;
  });
  const err = (await thread.openAhead("/nowhere", false).catch((e: unknown) => e)) as CoreError;
  expect(err).toBeInstanceOf(CoreError);
  expect(err.code).toBe("internal_error");
  expect(err.data?.problem).toBe(THREAD_STOPPED);
  expect(err.message).toContain("could not be started");
  expect(err.message).toContain("Worker creation failed");
  fails = false;
  void thread.openAhead("/nowhere", false);
  expect(thread.running).toBe(true);
});
