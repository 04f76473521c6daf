import { Database } from "bun:sqlite";
import type { ChunkAnswer, ChunkAsk } from "./chunk-thread.ts";
import { DocumentStore } from "./document-store.ts";

/**
 * The chunk writer's thread (store/chunk-thread.ts): a connection of its own to the database,
 * each batch of a document's chunks inserted (FTS5 tokenizes here, beside the main loop's PDF
 * reading); a long run of batches pauses now and then so another core's writes get in.
 * Waiting for another process's lock blocks this thread only. Built as an entry point of its
 * own (scripts/compile.ts).
 */
declare const self: {
  onmessage: ((event: MessageEvent<ChunkAsk>) => void) | null;
  postMessage(message: ChunkAnswer): void;
};

let docs: DocumentStore | undefined;
/** How long back-to-back batches may hold the write lock before a pause lets another core in. */
const STREAK_MS = 50;
let streak = 0;
let lastEnd = Number.NEGATIVE_INFINITY;

self.onmessage = (event: MessageEvent<ChunkAsk>) => {
  const ask = event.data;
  try {
    if (!docs) {
      const db = new Database(ask.path, { readwrite: true, create: false, strict: true });
      db.run(`PRAGMA busy_timeout = ${ask.busyWaitMs}`);
      db.run("PRAGMA synchronous = NORMAL");
      db.run("PRAGMA foreign_keys = ON");
      db.run("PRAGMA secure_delete = ON");
      docs = new DocumentStore(db);
    }
    const started = performance.now();
    docs.addChunks(ask.doc, ask.chunks);
    const ended = performance.now();
    // Batches back to back (a text read faster than it is indexed) hold the lock in a streak;
    // past STREAK_MS the lock is left free as long as the last batch held it. Batches that come
    // as a PDF is read have gaps of their own and pay nothing.
    streak = started - lastEnd < 2 ? streak + (ended - started) : ended - started;
    lastEnd = ended;
    if (streak > STREAK_MS) {
      Bun.sleepSync(Math.max(1, ended - started));
      streak = 0;
      lastEnd = performance.now();
    }
    self.postMessage({ id: ask.id, ok: true });
  } catch (err) {
    const e = err as { name?: string; message?: string; code?: string; data?: Record<string, unknown> };
    const answer: ChunkAnswer = {
      id: ask.id,
      ok: false,
      error: { name: e.name ?? "Error", message: e.message ?? String(err), code: e.code, data: e.data },
    };
    self.postMessage(answer);
  }
};
