import { describe, expect, test } from "bun:test";
import type { PendingDocument } from "../../src/store/document-store.ts";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const HOUR = 60 * 60 * 1000;

/** An add's chunks with no document row: what a core killed mid-add leaves. */
function uncommitted(store: Store, documentId: string, at: number, rows: number, word: string): void {
  const doc: PendingDocument = { documentId, userId: "ann", sessionId: "", since: 0, at };
  for (let i = 0; i < rows; i += 500) {
    const chunks = Array.from({ length: Math.min(500, rows - i) }, (_, k) => ({
      index: i + k,
      text: `paragraph ${i + k} about ${word} lorem ipsum dolor sit amet, consectetur adipiscing elit`,
    }));
    store.documents.addChunks(doc, chunks);
  }
}

const chunkRows = (store: Store, documentId: string) => store.documents.chunkIds("ann", documentId).length;

describe("the sweep of a killed add's chunks (store/orphan-sweep.ts)", () => {
  test("runs after the open with no add, holds the loop for one small batch at a time, and leaves no copy of the text", async () => {
    using dir = tmpdir();
    const first = Store.open(dir.path, { chunkThread: false });
    uncommitted(first, "killed", Date.now() - 2 * HOUR, 3000, "ORPHANWORD");
    first.close();

    const store = Store.open(dir.path, { chunkThread: false, firstSweepMs: 0 });
    // The longest the loop went unanswered (a ping waits as long) while the sweep ran.
    let worst = 0;
    let last = performance.now();
    const beat = setInterval(() => {
      const t = performance.now();
      worst = Math.max(worst, t - last);
      last = t;
    }, 2);
    const began = Date.now();
    while (chunkRows(store, "killed") > 0 && Date.now() - began < 30_000)
      await new Promise((r) => setTimeout(r, 20));
    await store.orphans.run();
    clearInterval(beat);

    expect(chunkRows(store, "killed")).toBe(0);
    // One unbounded DELETE of 3,000 rows holds it for seconds; a batch, tens of milliseconds.
    expect(worst).toBeLessThan(250);
    // secure_delete, FTS5's secure-delete, and the log emptied: the text is in no file.
    expect(filesHolding(dir.path, "ORPHANWORD")).toEqual([]);
    expect(filesHolding(dir.path, "orphanword")).toEqual([]);
    store.close();
  }, 60_000);

  test("an add younger than an hour (another core's, in progress) is left alone until it is that old", async () => {
    using dir = tmpdir();
    let clock = Date.now();
    const store = Store.open(dir.path, {
      chunkThread: false,
      firstSweepMs: 60_000,
      now: () => new Date(clock),
    });
    uncommitted(store, "live", clock - HOUR + 1000, 40, "LIVEWORD");
    uncommitted(store, "done", clock - 2 * HOUR, 3, "DONEWORD");
    store.documents.commit(
      { documentId: "done", userId: "ann", sessionId: "", since: 0, at: clock - 2 * HOUR },
      { name: "done.md", format: "markdown", chunks: 3, bytes: 10 },
    );

    expect(await store.orphans.run()).toBe(0);
    expect(chunkRows(store, "live")).toBe(40);
    clock += 1001;
    expect(await store.orphans.run()).toBe(40);
    expect(chunkRows(store, "live")).toBe(0);
    // A committed document is never the sweep's.
    expect(chunkRows(store, "done")).toBe(3);
    store.close();
  });

  test("a pass is due when the youngest uncommitted add comes of age, with no add or reopen in between", async () => {
    using dir = tmpdir();
    let clock = Date.now();
    const store = Store.open(dir.path, { chunkThread: false, firstSweepMs: 0, now: () => new Date(clock) });
    uncommitted(store, "young", clock - HOUR + 50, 5, "YOUNGWORD");
    await store.orphans.run();
    expect(chunkRows(store, "young")).toBe(5);
    // The pass above set a timer for the rows' hour (50 ms from here).
    clock += 50;
    const began = Date.now();
    while (chunkRows(store, "young") > 0 && Date.now() - began < 3000)
      await new Promise((r) => setTimeout(r, 20));
    expect(chunkRows(store, "young")).toBe(0);
    store.close();
  });
});
