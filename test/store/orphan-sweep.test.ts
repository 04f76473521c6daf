import { Database } from "bun:sqlite";
import { describe, expect, spyOn, test } from "bun:test";
import { join } from "node:path";
import { addDocument } from "../../src/documents/add-document.ts";
import { DocumentStore, type PendingDocument } from "../../src/store/document-store.ts";
import { SWEEP_DOCS } from "../../src/store/orphan-sweep.ts";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { Interleaving } from "../fixtures/interleave.ts";
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

/** A store on the test's clock, with no pass of the sweep but those the test runs. */
const clockedStore = (path: string, clock: () => number) =>
  Store.open(path, { chunkThread: false, firstSweepMs: 60_000, now: () => new Date(clock()) });

const chunkRows = (store: Store, documentId: string) => store.documents.chunkIds("ann", documentId).length;

describe("the sweep of a killed add's chunks (store/orphan-sweep.ts)", () => {
  test("runs after the open with no add, holds the loop for one small batch at a time, and leaves no copy of the text", async () => {
    using dir = tmpdir();
    const first = Store.open(dir.path, { chunkThread: false });
    uncommitted(first, "killed", Date.now() - 2 * HOUR, 3000, "ORPHANWORD");
    first.close();

    // Each batch (a transaction on this loop: chunkThread false) seen as it runs.
    const loop = new Interleaving();
    const original = DocumentStore.prototype.discard;
    const batch = spyOn(DocumentStore.prototype, "discard").mockImplementation(function (
      this: DocumentStore,
      documentId: string,
      limit: number,
    ) {
      loop.slice(limit);
      return original.call(this, documentId, limit);
    });
    const store = Store.open(dir.path, { chunkThread: false, firstSweepMs: 0 });
    try {
      const began = Date.now();
      while (chunkRows(store, "killed") > 0 && Date.now() - began < 30_000)
        await new Promise((r) => setTimeout(r, 20));
      await store.orphans.run();
    } finally {
      batch.mockRestore();
    }

    expect(chunkRows(store, "killed")).toBe(0);
    // One unbounded DELETE of 3,000 rows held the loop for seconds: batches of 32 rows (up to
    // ~150 ms each: orphan-sweep.ts), and the loop (a ping) had its turn between each two.
    expect(loop.slices.length).toBeGreaterThanOrEqual(3000 / 32);
    expect(Math.max(...loop.slices)).toBeLessThanOrEqual(32);
    expect(loop.unanswered).toBe(0);
    // secure_delete, FTS5's secure-delete, and the log emptied: the text is in no file.
    expect(filesHolding(dir.path, "ORPHANWORD")).toEqual([]);
    expect(filesHolding(dir.path, "orphanword")).toEqual([]);
    store.close();
  }, 60_000);

  test("an add younger than an hour (another core's, in progress) is left alone until it is that old", async () => {
    using dir = tmpdir();
    let clock = Date.now();
    const store = clockedStore(dir.path, () => clock);
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

  test("a pass reads the documents a slice at a time: a library of thousands is never scanned in one go on the loop", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false, firstSweepMs: 60_000 });
    // Committed documents (a row and a chunk each) straight into the tables, then one killed add behind them.
    const raw = new Database(join(dir.path, "local-ai.db"));
    const doc = raw.query(
      `INSERT INTO documents (document_id, user_id, session_id, name, format, chunks, bytes, created_at)
       VALUES (?, 'ann', '', 'n', 'text', 1, 1, 1)`,
    );
    const chunk = raw.query(
      `INSERT INTO memory (user_id, session_id, seq, source, root, text, at, document_id, chunk)
       VALUES ('ann', '', NULL, ?, '', 'x', 1, ?, 0)`,
    );
    raw.transaction(() => {
      for (let i = 0; i < 2 * SWEEP_DOCS + 5; i++) {
        const id = `doc-${String(i).padStart(5, "0")}`;
        doc.run(id);
        chunk.run(`document:${id}`, id);
      }
    })();
    raw.close();
    uncommitted(store, "zz-killed", Date.now() - 2 * HOUR, 3, "LASTWORD");
    const first = store.documents.uncommitted("", SWEEP_DOCS);
    expect(first).toEqual({ found: [], last: `doc-${String(SWEEP_DOCS - 1).padStart(5, "0")}` });
    expect(store.documents.uncommitted("doc-00510", SWEEP_DOCS)).toMatchObject({
      found: [{ documentId: "zz-killed" }],
      last: null,
    });
    expect(await store.orphans.run()).toBe(3);
    expect(chunkRows(store, "zz-killed")).toBe(0);
    store.close();
  });
});

/**
 * A store on the test's clock with an add whose commit waits for this core's erases (a large
 * delete: minutes), held there with all its chunks stored: `reached` then, `open` lets it commit.
 */
function heldAdd(path: string, clock: () => number) {
  const store = clockedStore(path, clock);
  const gate = Promise.withResolvers<void>();
  const reached = Promise.withResolvers<void>();
  const original = store.afterErases.bind(store);
  // The add's own wait is the one asked with no signal (each write passes its own, or undefined).
  const wait = spyOn(store, "afterErases").mockImplementation((...args: [AbortSignal?]) => {
    if (args.length > 0) return original(...args);
    reached.resolve();
    return gate.promise;
  });
  const text = Array.from({ length: 200 }, (_, i) => `LONGADD paragraph ${i} ${"filler words ".repeat(90)}`);
  const added = addDocument(
    { user_id: "ann", text: text.join("\n\n") },
    {
      store,
      readFile: async () => new Uint8Array(),
      signal: new AbortController().signal,
      progress: () => {},
      settle: () => true,
      now: clock,
      newId: () => "doc-long",
    },
  ).catch((err: unknown) => err as Error);
  return {
    store,
    reached: reached.promise,
    open: () => gate.resolve(),
    added,
    [Symbol.dispose]: () => {
      wait.mockRestore();
      store.close();
    },
  };
}

describe("an add still running past the hour (store/orphan-sweep.ts)", () => {
  test("of this core keeps its chunks: the sweep erased a long add's first batches, and it committed a document missing them", async () => {
    using dir = tmpdir();
    let clock = Date.now();
    using add = heldAdd(dir.path, () => clock);
    const { store } = add;
    await add.reached;
    expect(chunkRows(store, "doc-long")).toBeGreaterThan(64);
    clock += 2 * HOUR;
    expect(await store.orphans.run()).toBe(0);
    add.open();
    const added = await add.added;
    expect(chunkRows(store, "doc-long")).toBe((added as { chunks: number }).chunks);
    expect(store.memory.search("ann", "LONGADD", 3).length).toBeGreaterThan(0);
  });

  test("whose chunks another core swept fails, where it committed a document of chunks that were gone", async () => {
    using dir = tmpdir();
    using add = heldAdd(dir.path, Date.now);
    await add.reached;
    // Another core on the data folder, its sweep run on rows it took for a killed core's.
    const otherDb = new Database(join(dir.path, "local-ai.db"));
    const other = new DocumentStore(otherDb);
    while (other.discard("doc-long", 64) > 0);
    otherDb.close();
    add.open();
    const failed = await add.added;
    expect(failed).toMatchObject({ code: "internal_error" });
    expect((failed as Error).message).toContain("send it again");
    expect(add.store.documents.find("ann", "doc-long")).toBeUndefined();
    expect(add.store.documents.list("ann", {}).documents).toEqual([]);
  });
});

describe("the commit's count of its stored chunks", () => {
  test("reads the chunks' index alone: with their rows read too, a 50,000-chunk commit held the loop ~80 ms", async () => {
    using dir = tmpdir();
    Store.open(dir.path, { chunkThread: false }).close();
    const db = new Database(join(dir.path, "local-ai.db"));
    const documents = new DocumentStore(db);
    const doc: PendingDocument = {
      documentId: "doc-c",
      userId: "ann",
      sessionId: "",
      since: 0,
      at: Date.now(),
    };
    documents.addChunks(doc, [{ index: 0, text: "one chunk" }]);
    const counts: string[] = [];
    const query = db.query.bind(db);
    const spy = spyOn(db, "query").mockImplementation((sql: string) => {
      if (/COUNT\(\*\)[\s\S]*FROM memory/i.test(sql)) counts.push(sql);
      return query(sql);
    });
    expect(documents.commit(doc, { name: "c", format: "text", chunks: 1, bytes: 9 })).toBe(true);
    spy.mockRestore();
    expect(counts).toHaveLength(1);
    const args = ["doc-c", "ann"].slice(0, counts[0]?.match(/\?/g)?.length);
    const plan = db.query(`EXPLAIN QUERY PLAN ${counts[0]}`).all(...args) as { detail: string }[];
    expect(plan.map((p) => p.detail).join(" ")).toContain("COVERING INDEX memory_by_document");
    db.close();
  });
});
