import type { Database } from "bun:sqlite";
import type { ChunkAnswer, ChunkAsk } from "./chunk-thread.ts";
import { BUSY_TIMEOUT_MS } from "./db/open.ts";
import { StatementDatabase } from "./db/statements.ts";
import { useMemoryForTemp } from "./db/temp-dir.ts";
import { DocumentStore, type PendingDocument } from "./document-store.ts";
import { type EraseResult, type EraseWork, runErase } from "./erase-work.ts";
import { searchSessions } from "./session-search.ts";

/**
 * The store's thread (store/chunk-thread.ts): a connection of its own to the database, each
 * batch of a document's chunks inserted (FTS5 tokenizes here, beside the main loop's PDF
 * reading; a long run of batches pauses now and then so another core's writes get in), and
 * erases run whole (store/erase-work.ts), one at a time in the order asked. A second thread of
 * the same code answers `sessions.search` (Store.search), so no search waits behind an erase.
 * Waiting for another process's lock blocks this thread only. Built as an entry point of its own
 * (scripts/compile.ts).
 */
declare const self: {
  onmessage: ((event: MessageEvent<ChunkAsk>) => void) | null;
  postMessage(message: ChunkAnswer): void;
};

let db: Database | undefined;
let docs: DocumentStore | undefined;
/** How long back-to-back batches may hold the write lock before a pause lets another core in. */
const STREAK_MS = 50;
let streak = 0;
let lastEnd = Number.NEGATIVE_INFINITY;

self.onmessage = (event: MessageEvent<ChunkAsk>) => {
  const ask = event.data;
  try {
    if (!db || !docs) {
      db = new StatementDatabase(ask.path, { readwrite: true, create: false, strict: true });
      db.run(`PRAGMA busy_timeout = ${ask.busyWaitMs}`);
      db.run("PRAGMA synchronous = NORMAL");
      db.run("PRAGMA foreign_keys = ON");
      db.run("PRAGMA secure_delete = ON");
      useMemoryForTemp(db);
      docs = new DocumentStore(db);
    }
    if (ask.work.kind === "search") {
      const { fts, userId, query, limit } = ask.work;
      self.postMessage({ id: ask.id, ok: true, value: searchSessions(db, fts, userId, query, limit) });
      return;
    }
    if (ask.work.kind === "erase") {
      self.postMessage({ id: ask.id, ok: true, value: erase(db, ask.work.work, ask.busyWaitMs) });
      return;
    }
    addChunks(docs, ask.work.doc, ask.work.chunks);
    self.postMessage({ id: ask.id, ok: true });
  } catch (err) {
    const e = err as { name?: string; message?: string; code?: string; data?: Record<string, unknown> };
    // SQLite opens a file it cannot write then read-only, and the connection stays so: dropped,
    // the next ask opens another, which writes once the file can be written again (else every
    // erase and add failed until a restart; docs/agent.md, The store, "Errors").
    if (/^SQLITE_READONLY/.test(e.code ?? "")) {
      db?.close(false);
      db = undefined;
      docs = undefined;
    }
    const answer: ChunkAnswer = {
      id: ask.id,
      ok: false,
      error: { name: e.name ?? "Error", message: e.message ?? String(err), code: e.code, data: e.data },
    };
    self.postMessage(answer);
  }
};

/**
 * An erase with the main connection's short busy wait (its log's scrub must not wait seconds on
 * each reader: store/erase.ts), another process's write lock waited out here, as Store.write does.
 */
function erase(db: Database, work: EraseWork, busyWaitMs: number): EraseResult {
  const deadline = Date.now() + busyWaitMs;
  db.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  try {
    for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
      try {
        return runErase(db, work);
      } catch (err) {
        if (!/^SQLITE_BUSY/.test((err as { code?: string }).code ?? "") || Date.now() >= deadline) throw err;
        Bun.sleepSync(wait);
      }
    }
  } finally {
    db.run(`PRAGMA busy_timeout = ${busyWaitMs}`);
  }
}

function addChunks(
  docs: DocumentStore,
  doc: PendingDocument,
  chunks: { index: number; text: string }[],
): void {
  const started = performance.now();
  docs.addChunks(doc, chunks);
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
}
