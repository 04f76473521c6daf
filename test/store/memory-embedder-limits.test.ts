import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { EmbedError } from "../../src/llama/embed-error.ts";
import { embed } from "../../src/llama/embeddings.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { embedFailure } from "../../src/server/embed-failure.ts";
import type { PendingDocument } from "../../src/store/document-store.ts";
import { MemoryEmbedder, type MemoryEmbedderDeps } from "../../src/store/memory-embedder.ts";
import { Store } from "../../src/store/store.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The background embedder's limits (docs/agent.md, "Memory that understands meaning"): a row the
// model cannot take never holds up the others, a document's chunks wait for its commit, status
// never counts a row twice, and a document's text is read a batch at a time.

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});

function remember(store: Store, user: string, session: string, text: string): void {
  store.conversations.commitTurn({
    userId: user,
    sessionId: session,
    agent: "a",
    messages: [{ role: "user", content: text }],
    memoryText: text,
    at: new Date(),
  });
}

/** A document's chunks stored (not yet committed, as during its add); its memory row ids. */
function pendingDocument(
  store: Store,
  id: string,
  chunks: string[],
): { doc: PendingDocument; ids: number[] } {
  const doc = { documentId: id, userId: "ann", sessionId: "", since: 0, at: Date.now() };
  store.documents.addChunks(
    doc,
    chunks.map((text, index) => ({ index, text })),
  );
  return { doc, ids: store.documents.chunkIds("ann", id) };
}

function commit(store: Store, doc: PendingDocument, chunks: number): void {
  expect(store.documents.commit(doc, { name: doc.documentId, format: "text", chunks, bytes: 1 })).toBe(true);
}

/** A model that answers each text with a vector of its length and first letter, recording each request. */
function fakeModel(refuse: (text: string) => boolean = () => false) {
  const requests: string[][] = [];
  const embed: MemoryEmbedderDeps["embed"] = async (texts, signal) => {
    signal.throwIfAborted();
    requests.push([...texts]);
    await new Promise((r) => setImmediate(r));
    const bad = texts.findIndex(refuse);
    // Refused however short it is cut (nothing left: not sent), as several-models.ts words an EmbedError "too_long".
    if (bad >= 0)
      throw new CoreError("invalid_request", `input.${bad}: too long`, {
        field: `input.${bad}`,
        index: bad,
        n_tokens: 1000,
        max_tokens: 500,
      });
    return texts.map((t) => {
      const v = [t.length, t.charCodeAt(0) || 1, 1];
      const n = Math.hypot(...v);
      return v.map((x) => x / n);
    });
  };
  return { requests, embed };
}

/** The stand-in's embeddings, an input it refuses named by its place as several-models.ts answers it. */
function standInEmbed(server: LlamaStandIn): MemoryEmbedderDeps["embed"] {
  return async (texts, signal) => {
    try {
      return (await embed(server, texts, { signal })).embeddings;
    } catch (err) {
      throw embedFailure(err, signal);
    }
  };
}

function job(store: Store, embedFn: MemoryEmbedderDeps["embed"], fp = { value: "m1" }, batch?: number) {
  return new MemoryEmbedder({
    store,
    model: "embed",
    fingerprint: () => fp.value,
    embed: embedFn,
    ...(batch ? { batch } : {}),
    settleMs: 1,
    retryMs: { initial: 20, max: 40 },
  });
}

describe("a row the model cannot take", () => {
  test("a document of chunks all too long for the stand-in is embedded shortened, and later turns too", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED });
    const server = standIn;
    // Each chunk 602 tokens with [CLS] and [SEP]: over the 512 the server takes (recording 114).
    const long = (i: number) => `${i} ${"word ".repeat(599)}`.trim();
    const chunks = Array.from({ length: 40 }, (_, i) => long(i));
    const { doc } = pendingDocument(store, "d1", chunks);
    commit(store, doc, chunks.length);
    remember(store, "ann", "s", "a turn after the document");
    const embedder = job(store, standInEmbed(server));
    await embedder.run();
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 41, total: 41 });
    expect(embedder.progress()).toEqual({
      embedded: 41,
      total: 41,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    remember(store, "bob", "t", "another user's turn");
    await embedder.run();
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 42, total: 42 });
    await embedder.stop();
    store.close();
  }, 30_000);

  test("a chat's input longer than the model takes still gets its query vector, shortened as a row's (recording 114)", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED });
    const server = standIn;
    const embedder = job(store, standInEmbed(server));
    // A pasted page: 1,202 tokens with [CLS] and [SEP], past the 512 the server takes.
    const input = "word ".repeat(1200).trim();
    const query = await embedder.queryVector(input, new AbortController().signal);
    expect(query?.vector).toHaveLength(64);
    await embedder.stop();
    store.close();
  });

  test("a row the model gives a vector holding NaN is set aside as such, never cut and sent again nor stored", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const t of ["a fine", "b garbage in", "c fine"]) remember(store, "ann", "s", t);
    const requests: string[][] = [];
    // As llama/embeddings.ts finds a vector holding NaN, and several-models.ts words it.
    const nan: MemoryEmbedderDeps["embed"] = async (texts, signal) => {
      requests.push([...texts]);
      const bad = texts.indexOf("b garbage in");
      if (bad >= 0)
        throw embedFailure(
          new EmbedError("not_finite", `input ${bad} came back holding NaN`, { index: bad }),
          signal,
        );
      return texts.map(() => [1, 0, 0]);
    };
    const embedder = job(store, nan);
    await embedder.run();
    // Before the fix it was taken as too long: cut in half, sent again, and the half's vector kept.
    expect(requests.flat().filter((t) => t.startsWith("b") && t !== "b garbage in")).toEqual([]);
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 2, total: 2 });
    expect(embedder.progress()).toMatchObject({ set_aside: 1, last_set_aside: { reason: "not_finite" } });
    const sent = requests.length;
    await embedder.run();
    expect(requests).toHaveLength(sent);
    await embedder.stop();
    store.close();
  });

  test("a row refused however short is marked and skipped; the others are embedded; a new model tries it again", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (const t of ["a fine", "b POISON", "c fine", "d fine"]) remember(store, "ann", "s", t);
    const model = fakeModel((t) => t.startsWith("b"));
    const fp = { value: "m1" };
    const embedder = job(store, model.embed, fp, 2);
    await embedder.run();
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 3, total: 3 });
    expect(embedder.progress()).toEqual({
      embedded: 3,
      total: 3,
      model: "embed",
      set_aside: 1,
      last_set_aside: { reason: "too_long", message: "input.0: too long" },
    });
    // Never asked for again by this model, nor found by a search of its vectors.
    const sent = model.requests.length;
    await embedder.run();
    expect(model.requests).toHaveLength(sent);
    const [query] = (await fakeModel().embed(["b POISON"], new AbortController().signal)) ?? [];
    const near = store.memory.vectors.nearest(
      { fingerprint: "m1", vector: query as number[] },
      { sql: "1", params: {}, owners: ["ann"] },
      10,
    );
    expect(near).toHaveLength(3);
    fp.value = "m2";
    await embedder.run();
    expect(model.requests.slice(sent).flat()).toContain("b POISON");
    expect(store.memory.vectors.counts("m2")).toEqual({ embedded: 3, total: 3 });
    await embedder.stop();
    store.close();
  });
});

describe("a document's chunks and status", () => {
  test("a pending document's chunks are left to its add, which embeds them after its commit", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    remember(store, "ann", "s", "a turn");
    const { doc, ids } = pendingDocument(store, "d1", ["c1", "c2", "c3"]);
    const model = fakeModel();
    const embedder = job(store, model.embed);
    await embedder.run();
    expect(model.requests.flat()).toEqual(["a turn"]);
    expect(embedder.progress()).toEqual({
      embedded: 1,
      total: 1,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    commit(store, doc, 3);
    const progress: [number, number][] = [];
    await embedder.embedChunks(ids, (d, t) => progress.push([d, t]), new AbortController().signal);
    expect(progress.at(-1)).toEqual([3, 3]);
    expect(model.requests.flat().sort()).toEqual(["a turn", "c1", "c2", "c3"]);
    expect(embedder.progress()).toEqual({
      embedded: 4,
      total: 4,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    await embedder.stop();
    store.close();
  });

  test("the job and a document's add at once: embedded never exceeds total, and ends exact", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const texts = Array.from({ length: 12 }, (_, i) => `chunk ${i}`);
    const { doc, ids } = pendingDocument(store, "d1", texts);
    commit(store, doc, texts.length);
    const seen: { embedded: number; total: number }[] = [];
    const model = fakeModel();
    const embedder = job(
      store,
      (t, signal) => {
        seen.push(embedder.progress());
        return model.embed(t, signal);
      },
      { value: "m1" },
      2,
    );
    await Promise.all([embedder.run(), embedder.embedChunks(ids, () => {}, new AbortController().signal)]);
    seen.push(embedder.progress());
    expect(seen.filter((p) => p.embedded > p.total)).toEqual([]);
    expect(embedder.progress()).toEqual({
      embedded: 12,
      total: 12,
      model: "embed",
      set_aside: 0,
      last_set_aside: null,
    });
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 12, total: 12 });
    // Each side reads what is still lacking a batch at a time: far fewer than twice each row.
    expect(model.requests.flat().length).toBeLessThan(2 * texts.length);
    await embedder.stop();
    store.close();
  });

  test("embedChunks reads a document's text a batch at a time, never all of it at once", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const texts = Array.from({ length: 200 }, (_, i) => `${i} ${"x".repeat(995)}`);
    const { doc, ids } = pendingDocument(store, "d1", texts);
    commit(store, doc, texts.length);
    let most = 0;
    const guard = store.guard.bind(store);
    store.guard = <T>(work: () => T): T => {
      const out = guard(work);
      most = Math.max(most, textIn(out));
      return out;
    };
    const model = fakeModel();
    const embedder = job(store, model.embed, { value: "m1" }, 4);
    await embedder.embedChunks(ids, () => {}, new AbortController().signal);
    expect(store.memory.vectors.counts("m1")).toEqual({ embedded: 200, total: 200 });
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(4 * 1000);
    await embedder.stop();
    store.close();
  });
});

/** The characters of the strings in a value (a query's rows). */
function textIn(value: unknown): number {
  if (typeof value === "string") return value.length;
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + textIn(v), 0);
  if (value && typeof value === "object") return textIn(Object.values(value));
  return 0;
}

describe("a backlog below many rows already embedded", () => {
  // Newest first, each batch's look began at the top again and stepped over every row embedded
  // so far: on the main loop, ~1 ms a thousand rows (90 ms a batch once 90,000 had vectors), so
  // a model change's re-embedding of a large memory held pings longer and longer, N²/batch in all.
  test("each batch's look goes on below the last, not from the newest row again", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    const db = new Database(join(dir.path, "local-ai.db"));
    db.run("PRAGMA busy_timeout = 5000");
    const insert = db.query(
      "INSERT INTO memory (user_id, session_id, seq, source, root, text, at) VALUES ('ann', 's', ?, 'session:s', '', ?, 0)",
    );
    db.transaction(() => {
      for (let i = 0; i < 80_120; i++) insert.run(i, `old row ${i}`);
    })();
    // All but the 120 oldest rows already have a vector of the model.
    db.run(
      `INSERT INTO memory_vectors (memory_id, fingerprint, dimensions, vector, bits)
       SELECT id, 'm1', 1, x'0000803f', x'00000000' FROM memory WHERE seq >= 120`,
    );
    db.close();
    const vectors = store.memory.vectors;
    const lacking = vectors.lacking.bind(vectors);
    const took: number[] = [];
    vectors.lacking = (...args: Parameters<typeof lacking>) => {
      const t = performance.now();
      const rows = lacking(...args);
      took.push(performance.now() - t);
      return rows;
    };
    const job = new MemoryEmbedder({
      store,
      model: "embed",
      fingerprint: () => "m1",
      embed: async (texts) => texts.map(() => [1, 0, 0]),
      batch: 4,
      settleMs: 1,
    });
    await job.run();
    expect(job.progress()).toMatchObject({ embedded: 80_120, total: 80_120 });
    // The first look steps over the rows embedded once; the 29 after it (30 batches of 4, the
    // last one caught up as counted), over nothing again.
    const [first = 0, ...later] = took;
    later.sort((a, b) => a - b);
    expect(later.length).toBe(29);
    expect(later[Math.floor(later.length / 2)] ?? 0).toBeLessThan(first / 5);
    await job.stop();
    store.close();
  }, 60_000);
});
