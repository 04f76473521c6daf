import { expect, test } from "bun:test";
import { ChunkPipeline, STORE_BATCH } from "../../src/documents/chunk-pipeline.ts";
import type { Store } from "../../src/store/store.ts";

/**
 * The pipeline's back pressure (docs/agent.md "Documents": at most 4 batches out at once): a
 * store whose writes are answered one at a time, when the test says.
 */
function heldStore() {
  const writes: { resolve: () => void; size: number }[] = [];
  let answered = 0;
  const store = {
    writeChunks: (_doc: unknown, chunks: unknown[]) => {
      const { promise, resolve } = Promise.withResolvers<void>();
      writes.push({ resolve, size: chunks.length });
      return promise;
    },
  } as unknown as Store;
  return {
    store,
    writes,
    outstanding: () => writes.length - answered,
    answerOne: () => writes[answered++]?.resolve(),
  };
}

const doc = { documentId: "doc-1", userId: "u", sessionId: "", since: 0, at: 0 };
const chunks = (n: number) =>
  Array.from({ length: n }, (_, index) => ({ index, text: `chunk ${index}`, heading_path: [] }));
const turn = () => new Promise<void>((r) => setImmediate(r));

test("a slice of many chunks goes out four batches at a time, not all at once", async () => {
  // A slice of 64 Ki characters of one-word headings makes 16,000 chunks: 250 batches were sent
  // at once, each a transaction queued on the chunk thread.
  const held = heldStore();
  const pipeline = new ChunkPipeline(held.store, doc, new AbortController().signal, () => 1);
  let added = false;
  const adding = pipeline.add(chunks(STORE_BATCH * 20)).then(() => {
    added = true;
  });
  let most = 0;
  for (let i = 0; i < 100 && !added; i++) {
    await turn();
    most = Math.max(most, held.outstanding());
    held.answerOne();
  }
  await adding;
  most = Math.max(most, held.outstanding());
  expect(most).toBeLessThanOrEqual(4);
  while (held.outstanding() > 0) held.answerOne();
  await pipeline.finish(() => {});
  expect(held.writes.reduce((n, w) => n + w.size, 0)).toBe(STORE_BATCH * 20);
  expect(pipeline.stored).toBe(STORE_BATCH * 20);
});

test("a cancel while the reader waits for room sends no more batches", async () => {
  const held = heldStore();
  const cancel = new AbortController();
  const pipeline = new ChunkPipeline(held.store, doc, cancel.signal, () => 1);
  const adding = pipeline.add(chunks(STORE_BATCH * 20)).then(
    () => "added",
    (e: Error) => e.message,
  );
  await turn();
  const sent = held.writes.length;
  cancel.abort(new Error("cancelled"));
  while (held.outstanding() > 0) {
    held.answerOne();
    await turn();
  }
  expect(await adding).toBe("cancelled");
  expect(held.writes.length).toBe(sent);
  await pipeline.settle();
});

test("the last, partial batch waits for room too: never a fifth out at the finish", async () => {
  // finish() sent the rest at once: with four full batches still out, five were.
  const held = heldStore();
  const pipeline = new ChunkPipeline(held.store, doc, new AbortController().signal, () => 1);
  await pipeline.add(chunks(STORE_BATCH * 4 + 1));
  expect(held.outstanding()).toBe(4);
  const finishing = pipeline.finish(() => {});
  await turn();
  expect(held.outstanding()).toBeLessThanOrEqual(4);
  while (held.writes.length < 5) {
    held.answerOne();
    await turn();
  }
  while (held.outstanding() > 0) held.answerOne();
  await finishing;
  expect(pipeline.stored).toBe(STORE_BATCH * 4 + 1);
});
