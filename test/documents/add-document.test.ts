import { Database } from "bun:sqlite";
import { describe, expect, spyOn, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type AddDeps, addDocument } from "../../src/documents/add-document.ts";
import type { Chunk } from "../../src/documents/chunk.ts";
import { readDocumentFile } from "../../src/documents/document-file.ts";
import { BEAT_MS, IndexBeat, QUIET_MS, type Timers } from "../../src/documents/index-beat.ts";
import { MAX_DOCUMENT_BYTES, MAX_READING_BYTES } from "../../src/documents/limits.ts";
import { readDocument } from "../../src/documents/read-document.ts";
import type { DocumentsAddParams, IndexProgress } from "../../src/protocol/documents.ts";
import { CoreError, cancelledError } from "../../src/protocol/errors.ts";
import { ChunkThread } from "../../src/store/chunk-thread.ts";
import { ORPHAN_CHUNK_MS } from "../../src/store/document-store.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

let ids = 0;
const deps = (store: Store, extra: Partial<AddDeps> = {}): AddDeps => ({
  store,
  readFile: async () => {
    throw new Error("no files here");
  },
  signal: new AbortController().signal,
  progress: () => {},
  settle: () => true,
  now: Date.now,
  newId: () => `doc-${++ids}`,
  ...extra,
});
/** Embedding that the host's cancel stops: the add's cancel lands after its commit. */
const cancelledWhileEmbedded =
  (cancel: AbortController): AddDeps["embedChunks"] =>
  async (_ids, _p, signal) => {
    cancel.abort(cancelledError());
    signal.throwIfAborted();
  };
const params = (text: string, more: Partial<DocumentsAddParams> = {}): DocumentsAddParams => ({
  user_id: "ann",
  text,
  ...more,
});
const manyParagraphs = (n: number, word: string) =>
  Array.from({ length: n }, (_, i) => `${word} paragraph ${i} ${"filler words here ".repeat(60)}`).join(
    "\n\n",
  );

describe("addDocument", () => {
  test("the embedding seam: called after the commit with the chunks' rows, its progress as `embedding`", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const seen: IndexProgress[] = [];
    let rows: number[] = [];
    const added = await addDocument(
      params("# Title\n\nfirst LEMUR part\n\n# Two\n\nsecond part"),
      deps(store, {
        progress: (p) => seen.push(p),
        embedChunks: async (ids, onProgress) => {
          // Committed by now: recall already finds it.
          expect(store.memory.search("ann", "lemur", 3)).toHaveLength(1);
          rows = ids;
          onProgress(ids.length, ids.length);
        },
      }),
    );
    expect(added).toMatchObject({
      name: "# Title first LEMUR part # Two second part",
      format: "markdown",
      chunks: 2,
    });
    expect(rows).toEqual(store.documents.chunkIds("ann", added.document_id));
    expect(rows).toHaveLength(2);
    expect(seen.at(-1)).toEqual({ phase: "embedding", done: 2, total: 2 });
    // `indexing` only rises, and ends at its total.
    const indexing = seen.filter((p) => p.phase === "indexing");
    expect(indexing.map((p) => p.done)).toEqual([...indexing.map((p) => p.done)].sort((a, b) => a - b));
    expect(indexing.at(-1)?.done).toBe(indexing.at(-1)?.total);
    // A chunk is stored under its headings.
    expect(store.memory.search("ann", "lemur", 1)[0]?.doc.text).toBe("Title\nfirst LEMUR part");
    store.close();
  });

  test("an embedding model that crashes: the add succeeds and the document is found by text", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const added = await addDocument(
      params("the OCELOT text"),
      deps(store, {
        embedChunks: async () => {
          throw new Error("embedding server died");
        },
      }),
    );
    expect(added.chunks).toBe(1);
    expect(store.memory.search("ann", "ocelot", 3)).toHaveLength(1);
    store.close();
  });

  test("a cancel while embedding takes the document out again", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const cancel = new AbortController();
    const adding = addDocument(
      params("the TAPIR text"),
      deps(store, {
        signal: cancel.signal,
        embedChunks: async (_ids, _p, signal) => {
          cancel.abort(new Error("cancelled"));
          signal.throwIfAborted();
        },
      }),
    );
    await expect(adding).rejects.toThrow("cancelled");
    expect(store.documents.list("ann", { limit: 500 }).documents).toEqual([]);
    expect(store.memory.search("ann", "tapir", 3)).toEqual([]);
    store.close();
  });

  // The KV states quoting the document (recalled by a chat while it was embedded) that the cancel's
  // erase could not remove (data_dir/kv not writable): only logged, the add answered `cancelled`,
  // the host never learnt the id to send `documents.delete` with, and the quoted words stayed on
  // disk. Still `cancelled` (the dispatcher lets an acknowledged cancel win), its data names the
  // files as `documents.delete`'s failure does (methods/kv-erased.ts), and the document's id.
  test("a cancel whose KV erase leaves files names them and the document, never a plain cancel", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const cancel = new AbortController();
    const left = "/data/kv/s-1.bin";
    const adding = addDocument(
      params("the TAPIR text"),
      deps(store, {
        signal: cancel.signal,
        embedChunks: cancelledWhileEmbedded(cancel),
        forget: async () => {
          throw new CoreError("internal_error", "1 saved KV state file could not be removed", {
            key: "app.data_dir",
            file: left,
            files: [left],
          });
        },
      }),
    );
    const thrown = await adding.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(thrown).toMatchObject({
      code: "cancelled",
      data: {
        reason: "kv_state_left",
        key: "app.data_dir",
        file: left,
        files: [left],
        document_id: expect.stringMatching(/^doc-/),
      },
    });
    expect((thrown as Error).message).toContain("documents.delete");
    expect(store.documents.list("ann", { limit: 500 }).documents).toEqual([]);
    store.close();
  });

  // The cancel's erase of the committed document refused (another process holds the database
  // locked past its 5 s, a full disk): the plain failure lost to the acknowledged cancel in the
  // dispatcher, the host read `cancelled` ("nothing of the document is kept") while the document
  // stayed, listable and searchable, and never learnt the id to send `documents.delete` with.
  test("a cancel whose erase of the document fails names it, never a plain cancel", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const cancel = new AbortController();
    const refused = spyOn(store, "deleteDocument").mockImplementation(async () => {
      throw new CoreError("internal_error", "another process holds the database locked; try again", {
        key: "app.data_dir",
        path: dir.path,
        problem: "SQLITE_BUSY",
      });
    });
    const thrown = await addDocument(
      params("the TAPIR text"),
      deps(store, {
        signal: cancel.signal,
        embedChunks: cancelledWhileEmbedded(cancel),
      }),
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    refused.mockRestore();
    const [doc] = store.documents.list("ann", { limit: 500 }).documents;
    expect(thrown).toMatchObject({
      code: "cancelled",
      data: { reason: "document_left", problem: "SQLITE_BUSY", document_id: doc?.document_id },
    });
    expect((thrown as Error).message).toContain("documents.delete");
    store.close();
  });

  // A read that never ends: a file on a network or cloud drive gone offline (a FUSE mount, a
  // placeholder the OS fetches on open). The cancel must end the add, not wait for the drive.
  for (const stuck of ["sizeOf", "readFile"] as const)
    test(`a cancel while the file's ${stuck === "sizeOf" ? "stat" : "read"} hangs ends the add at once`, async () => {
      using dir = tmpdir();
      const store = Store.open(dir.path);
      const cancel = new AbortController();
      const called = Promise.withResolvers<void>();
      const stuckRead = Promise.withResolvers<never>();
      const hang = () => {
        called.resolve();
        return stuckRead.promise;
      };
      const adding = addDocument(
        params("", { text: undefined, path: "/offline/notes.md" }),
        deps(store, {
          signal: cancel.signal,
          sizeOf: stuck === "sizeOf" ? hang : async () => 10,
          readFile: stuck === "readFile" ? hang : async () => new TextEncoder().encode("text"),
        }),
      );
      await called.promise;
      const reason = new Error("cancelled by the host");
      cancel.abort(reason);
      // Ended within the loop's turn: nothing of the add waits on the drive.
      const turn = new Promise((resolve) => setImmediate(() => resolve("still waiting")));
      expect(await Promise.race([adding.catch((err: unknown) => err), turn])).toBe(reason);
      expect(store.documents.list("ann", { limit: 500 }).documents).toEqual([]);
      // The drive answers at last: its room in the reading budget is given back.
      stuckRead.reject(new Error("the drive went away"));
      store.close();
    });

  // The read a cancel stopped waiting for goes on, and fills its bytes once the drive answers:
  // its room in the reading budget must stay held until then, or a burst of cancelled adds on a
  // drive that comes back would hold every file's bytes at once, past MAX_READING_BYTES.
  test("a cancelled add's stuck read keeps its reading room until it ends", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const stuck: PromiseWithResolvers<Uint8Array>[] = [];
    // Four files of the most a document may be fill the budget between them.
    for (let i = 0; i < MAX_READING_BYTES / MAX_DOCUMENT_BYTES; i++) {
      const cancel = new AbortController();
      const read = Promise.withResolvers<Uint8Array>();
      const called = Promise.withResolvers<void>();
      const adding = addDocument(
        params("", { text: undefined, path: `/offline/big-${i}.md` }),
        deps(store, {
          signal: cancel.signal,
          sizeOf: async () => MAX_DOCUMENT_BYTES,
          readFile: () => {
            called.resolve();
            return read.promise;
          },
        }),
      );
      await called.promise;
      cancel.abort(new Error("cancelled by the host"));
      await adding.catch(() => {});
      stuck.push(read);
    }
    let nextRead = false;
    const next = addDocument(
      params("", { text: undefined, path: "/local/next.md" }),
      deps(store, {
        sizeOf: async () => MAX_DOCUMENT_BYTES,
        readFile: async () => {
          nextRead = true;
          return new TextEncoder().encode("next text");
        },
      }),
    );
    // Turns of the loop for the next add's stat and its place in the budget's line.
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(nextRead).toBe(false);
    stuck[0]?.resolve(new TextEncoder().encode("the drive answered"));
    expect(await next).toMatchObject({ chunks: 1 });
    expect(nextRead).toBe(true);
    for (const read of stuck) read.resolve(new Uint8Array());
    store.close();
  });

  // The reading budget admits a file by its size at the stat: one that grows before it is read
  // (a file still being copied or downloaded) must not hold megabytes on a room of bytes, or a
  // burst of them would grow the core past MAX_READING_BYTES, as images' room is kept (held.ts).
  test("a file that grew past its stat's size before its read is refused, never read past its room", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const path = join(dir.path, "being-saved.md");
    writeFileSync(path, `# Notes\n\n${"more words ".repeat(500_000)}`);
    const adding = addDocument(
      params("", { text: undefined, path }),
      deps(store, { readFile: readDocumentFile, sizeOf: async () => 20 }),
    );
    await expect(adding).rejects.toMatchObject({
      code: "invalid_request",
      data: { field: "path", problem: "unreadable" },
      message: expect.stringMatching(/grew past the 20 bytes/),
    });
    store.close();
  });

  test("a documents.delete while it is embedded: the add answers cancelled, not a document that is gone", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const adding = addDocument(
      params("the KINKAJOU text"),
      deps(store, {
        newId: () => "doc-deleted-meanwhile",
        embedChunks: async () => {
          await store.deleteDocument("ann", "doc-deleted-meanwhile");
        },
      }),
    );
    const err = await adding.catch((e) => e);
    expect(err).toMatchObject({ code: "cancelled", data: { reason: "document_deleted" } });
    expect(store.documents.list("ann", { limit: 500 }).documents).toEqual([]);
    expect(store.memory.search("ann", "kinkajou", 3)).toEqual([]);
    store.close();
  });

  test("a file whose name is only blanks or control characters is named by its first words, never ''", async () => {
    // '' is what a citation of an erased document shows (docs/protocol.md "Citations").
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const [path, name] of [
      ["/home/ann/ ", undefined],
      ["/home/ann/\u0001\n", undefined],
      ["/home/ann/notes.md", "\u0007\t"],
    ] as const) {
      const added = await addDocument(
        { user_id: "ann", path, ...(name ? { name } : {}) },
        deps(store, { readFile: async () => new TextEncoder().encode("Heron migration notes\n\nmore") }),
      );
      expect(added.name).toBe("Heron migration notes more");
      expect(store.documents.find("ann", added.document_id)?.name).toBe("Heron migration notes more");
    }
    store.close();
  });

  test("an add that waited its turn over an hour is not swept as a killed core's while it stores", async () => {
    // Adds wait for the reading budget and PDFs for the PDF thread: a host adding a library at
    // once can leave one waiting past ORPHAN_CHUNK_MS. Its rows were dated from its request, so
    // the sweep took them for a dead core's and erased them under it, and it committed without them.
    using dir = tmpdir();
    const store = Store.open(dir.path, { firstSweepMs: 1e9 });
    let first = true;
    const now = () => {
      if (!first) return Date.now();
      first = false;
      return Date.now() - 2 * ORPHAN_CHUNK_MS;
    };
    let sweep: Promise<number> | undefined;
    const added = await addDocument(
      params(manyParagraphs(800, "heron")),
      deps(store, {
        now,
        progress: (p) => {
          if (p.phase === "indexing" && p.done >= p.total / 4) sweep ??= store.orphans.run();
        },
      }),
    );
    expect(await sweep).toBe(0);
    expect(store.documents.chunkIds("ann", added.document_id)).toHaveLength(added.chunks);
    store.close();
  });

  test("a request cancelled before its commit commits nothing (settle refused)", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const cancel = new AbortController();
    cancel.abort(new Error("cancelled"));
    await expect(
      addDocument(params("late"), deps(store, { settle: () => false, signal: cancel.signal })),
    ).rejects.toThrow();
    expect(store.documents.list("ann", { limit: 500 }).documents).toEqual([]);
    store.close();
  });

  // The commit waits for this core's erases (a users.delete of years of chats, the 0.1 import:
  // minutes); its point of no return came before that wait, so a cancel then was refused and the
  // add went on waiting, then committed.
  test("a cancel while the commit waits behind an erase ends the add at once, nothing kept", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.commitTurn({
      userId: "bob",
      sessionId: "gone",
      agent: "a",
      messages: [{ role: "user", content: "hi" }],
      at: new Date(),
    });
    // The erase's first step on the store's thread, held until the test lets it go.
    const gate = Promise.withResolvers<void>();
    const erase = ChunkThread.prototype.erase;
    const held = spyOn(ChunkThread.prototype, "erase").mockImplementation(async function (
      this: ChunkThread,
      w,
    ) {
      if (w.kind === "copies") await gate.promise;
      return erase.call(this, w);
    });
    try {
      const deleting = store.deleteSession("bob", "gone");
      const waiting = Promise.withResolvers<void>();
      const after = store.afterErases.bind(store);
      store.afterErases = () => {
        waiting.resolve();
        return after();
      };
      // As the dispatcher's RequestContext: a cancel after the point of no return is refused.
      const request = new AbortController();
      let settled = false;
      const adding = addDocument(
        params("The WAITINGWORD text."),
        deps(store, {
          signal: request.signal,
          settle: () => {
            if (request.signal.aborted) return false;
            settled = true;
            return true;
          },
        }),
      );
      const outcome = adding.then(
        () => "added",
        (err: unknown) => String((err as { code?: string }).code ?? err),
      );
      await waiting.promise;
      expect(settled).toBe(false);
      request.abort(cancelledError("cancelled by the host"));
      // Answered while the erase is still held.
      expect(await outcome).toBe("cancelled");
      gate.resolve();
      expect((await deleting).deleted).toBe(true);
      await store.afterErases();
      expect(store.documents.list("ann", { limit: 500 }).documents).toEqual([]);
      expect(store.memory.search("ann", "WAITINGWORD", 5)).toEqual([]);
    } finally {
      gate.resolve();
      held.mockRestore();
      await store.stop();
    }
  });

  // A batch of chunks may wait up to 5 s for another core's write lock, and four may be out; the
  // discard of what was stored (a book's 13,000 rows) takes seconds more. The cancel waited for
  // all of it before it answered; now the removal goes on behind the answer, and the store's stop
  // waits for it, so nothing of the add is left on disk.
  test("a cancel while chunk batches are held answers at once; the chunks are removed behind it", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const gate = Promise.withResolvers<void>();
    const write = store.writeChunks.bind(store);
    const sent = Promise.withResolvers<void>();
    const landed: Promise<void>[] = [];
    const held = spyOn(store, "writeChunks").mockImplementation(async (doc, chunks) => {
      sent.resolve();
      await gate.promise;
      const written = write(doc, chunks);
      landed.push(written);
      return written;
    });
    try {
      const request = new AbortController();
      const outcome = addDocument(
        params(manyParagraphs(400, "HELDWORD")),
        deps(store, { signal: request.signal }),
      ).then(
        () => "added",
        (err: unknown) => String((err as { code?: string }).code ?? err),
      );
      await sent.promise;
      request.abort(cancelledError("cancelled by the host"));
      // Answered while the batches are still held (turns of the loop, not time).
      const turns = async (n: number) => {
        for (let i = 0; i < n; i++) await new Promise<void>((r) => setImmediate(r));
        return "still waiting";
      };
      expect(await Promise.race([outcome, turns(50)])).toBe("cancelled");
      gate.resolve();
      // The held batches land after the answer; the removal follows them, and the stop waits for it.
      while (landed.length === 0) await turns(1);
      await Promise.all(landed);
      await store.stop();
      const db = new Database(join(dir.path, "local-ai.db"));
      try {
        expect(db.query("SELECT count(*) AS n FROM memory").get()).toEqual({ n: 0 });
      } finally {
        db.close();
      }
    } finally {
      gate.resolve();
      held.mockRestore();
      store.close();
    }
  });

  test("two stores on one data folder add at once while a third holds the write lock: both land whole", async () => {
    using dir = tmpdir();
    const a = Store.open(dir.path);
    const b = Store.open(dir.path);
    // A third connection holds the write lock a while, as another process's long write would:
    // both adds wait for it off the loop (Store.write) rather than fail.
    const other = new Database(join(dir.path, "local-ai.db"));
    other.run("BEGIN IMMEDIATE");
    const release = setTimeout(() => other.run("COMMIT"), 300);
    const [x, y] = await Promise.all([
      addDocument(params(manyParagraphs(600, "ALPHA")), deps(a)),
      addDocument(params(manyParagraphs(600, "BETA")), deps(b)),
    ]);
    clearTimeout(release);
    other.close();
    expect(x.chunks).toBe(600);
    expect(y.chunks).toBe(600);
    for (const s of [a, b])
      expect(
        s.documents
          .list("ann", { limit: 500 })
          .documents.map((d) => d.chunks)
          .sort(),
      ).toEqual([600, 600]);
    expect(a.documents.chunkIds("ann", y.document_id)).toHaveLength(600);
    a.close();
    b.close();
  }, 60_000);
});

describe("readDocument's onChunks", () => {
  test("hands every chunk once, in order, while the text is still being read", async () => {
    const text = manyParagraphs(300, "GNU");
    let handedBeforeEnd = 0;
    let ended = false;
    const handed: Chunk[] = [];
    const read = await readDocument(
      { text },
      {
        readFile: async () => new Uint8Array(),
        onChunks: async (chunks) => {
          if (!ended) handedBeforeEnd += chunks.length;
          handed.push(...chunks);
        },
        onProgress: (p) => {
          if (p.phase === "indexing" && p.done === p.total) ended = true;
        },
      },
    );
    expect(handed).toEqual(read.chunks);
    expect(handedBeforeEnd).toBeGreaterThan(0);
    expect(handedBeforeEnd).toBeLessThan(read.chunks.length);
  });
});

describe("IndexBeat", () => {
  /** Timers run by hand. */
  function fakeTimers() {
    const pending: { at: number; every?: number; fn: () => void; live: boolean }[] = [];
    let now = 0;
    const timers: Timers = {
      after: (ms, fn) => {
        const t = { at: now + ms, fn, live: true };
        pending.push(t);
        return () => {
          t.live = false;
        };
      },
      every: (ms, fn) => {
        const t = { at: now + ms, every: ms, fn, live: true };
        pending.push(t);
        return () => {
          t.live = false;
        };
      },
    };
    const advance = (ms: number) => {
      const end = now + ms;
      for (;;) {
        const next = pending.filter((t) => t.live && t.at <= end).sort((p, q) => p.at - q.at)[0];
        if (!next) break;
        now = next.at;
        if (next.every) next.at += next.every;
        else next.live = false;
        next.fn();
      }
      now = end;
    };
    return { timers, advance };
  }

  test("quiet for 500 ms, then the latest every 250 ms until stopped", () => {
    const { timers, advance } = fakeTimers();
    const sent: IndexProgress[] = [];
    const beat = new IndexBeat((p) => sent.push(p), timers);
    beat.update({ phase: "reading", done: 1, total: 10 });
    advance(QUIET_MS - 1);
    expect(sent).toEqual([]);
    advance(1);
    expect(sent).toEqual([{ phase: "reading", done: 1, total: 10 }]);
    beat.update({ phase: "indexing", done: 5, total: 10 });
    advance(BEAT_MS);
    expect(sent.at(-1)).toEqual({ phase: "indexing", done: 5, total: 10 });
    advance(BEAT_MS * 4);
    expect(sent).toHaveLength(6);
    beat.stop();
    advance(BEAT_MS * 4);
    expect(sent).toHaveLength(6);
  });

  test("an add that ends within 500 ms sends nothing", () => {
    const { timers, advance } = fakeTimers();
    const sent: IndexProgress[] = [];
    const beat = new IndexBeat((p) => sent.push(p), timers);
    beat.update({ phase: "indexing", done: 1, total: 1 });
    advance(QUIET_MS - 10);
    beat.stop();
    advance(QUIET_MS * 4);
    expect(sent).toEqual([]);
  });
});

describe("documents read at once, by their sizes (MAX_READING_BYTES)", () => {
  test("a file that would pass the budget waits until room is made; a cancel while waiting leaves", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const MiB = 1024 * 1024;
    const read: string[] = [];
    const mayEnd = Promise.withResolvers<void>();
    // Four of 60 MiB fit the 256 MiB together (each held until `mayEnd`); a fifth of 40 waits.
    const sizes: Record<string, number> = { "/a.md": 60, "/b.md": 60, "/c.md": 60, "/d.md": 60, "/e.md": 40 };
    const fileDeps = (extra: Partial<AddDeps> = {}) =>
      deps(store, {
        sizeOf: async (path) => (sizes[path] ?? 0) * MiB,
        readFile: async (path) => {
          read.push(path);
          if (path !== "/e.md") await mayEnd.promise;
          return new TextEncoder().encode(`the file ${path} of WALLAROO words`);
        },
        ...extra,
      });
    const add = (path: string, extra?: Partial<AddDeps>) =>
      addDocument(params("", { text: undefined, path }), fileDeps(extra));
    const four = ["/a.md", "/b.md", "/c.md", "/d.md"].map((path) => add(path));
    const cancel = new AbortController();
    const fifth = add("/e.md", { signal: cancel.signal });
    const sixth = add("/e.md");
    await Bun.sleep(50);
    expect(read.sort()).toEqual(["/a.md", "/b.md", "/c.md", "/d.md"]);
    const reason = new Error("cancelled by the host");
    cancel.abort(reason);
    await expect(fifth).rejects.toBe(reason);
    await Bun.sleep(20);
    expect(read).not.toContain("/e.md");
    mayEnd.resolve();
    for (const added of await Promise.all(four)) expect(added.chunks).toBe(1);
    expect((await sixth).chunks).toBe(1);
    expect(read.filter((p) => p === "/e.md")).toHaveLength(1);
    store.close();
  });
});
