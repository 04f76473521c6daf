import type { Database } from "bun:sqlite";
import type { ChunkAnswer, ChunkAsk, OpenedAhead, ThreadWork } from "./chunk-thread.ts";
import { checkFile } from "./db/file-check.ts";
import { fileStamp } from "./db/file-stamp.ts";
import { BUSY_TIMEOUT_MS, openStore } from "./db/open.ts";
import { refuseOddFiles } from "./db/ownership.ts";
import { StatementDatabase } from "./db/statements.ts";
import { useMemoryForTemp } from "./db/temp-dir.ts";
import { DocumentStore, type PendingDocument } from "./document-store.ts";
import { runErase } from "./erase-work.ts";
import { runV01 } from "./import-v01-run.ts";
import { searchSessions } from "./session-search.ts";

/**
 * The store's thread (store/chunk-thread.ts): a connection of its own to the database, each
 * batch of a document's chunks inserted (FTS5 tokenizes here, beside the main loop's PDF
 * reading; a long run of batches pauses now and then so another core's writes get in), and
 * erases run whole (store/erase-work.ts), one at a time in the order asked, as are the 0.1
 * import's units (store/import-v01-run.ts). A second thread of the same code answers
 * `sessions.search` (Store.search), so no search waits behind an erase.
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
    // doctor's check reads the file read-only, on a connection it closes: nothing is written, no log made.
    if (ask.work.kind === "file") {
      self.postMessage({ id: ask.id, ok: true, value: checkFile(ask.path) });
      return;
    }
    if (ask.work.kind === "open") {
      self.postMessage({ id: ask.id, ok: true, value: openAhead(ask.work.dataDir, ask.work.withoutFts) });
      return;
    }
    if (!db || !docs) {
      // As the main open (db/ownership.ts): a FIFO at -journal, or at the name of a database
      // replaced since, would hold this open or its first read for good.
      refuseOddFiles(ask.path);
      db = new StatementDatabase(ask.path, { readwrite: true, create: false, strict: true });
      db.run(`PRAGMA busy_timeout = ${ask.busyWaitMs}`);
      db.run("PRAGMA synchronous = NORMAL");
      db.run("PRAGMA foreign_keys = ON");
      db.run("PRAGMA secure_delete = ON");
      useMemoryForTemp(db);
      docs = new DocumentStore(db);
    }
    if (ask.work.kind === "chunks") {
      addChunks(docs, ask.work.doc, ask.work.chunks);
      self.postMessage({ id: ask.id, ok: true });
      return;
    }
    self.postMessage({ id: ask.id, ok: true, value: answer(db, ask.work, ask.busyWaitMs) });
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

/** The store's open with its migrations (db/migrate-ahead.ts), on a connection closed once done. */
function openAhead(dataDir: string, withoutFts: boolean): OpenedAhead {
  const opened = openStore(dataDir, { withoutFts });
  opened.db.close(false);
  const reset =
    opened.resetFrom === undefined
      ? undefined
      : { aside: opened.resetFrom, problem: opened.resetProblem ?? "" };
  // Stamped once closed: its log is checkpointed into the file by then.
  return { reset, checked: opened.checked ? fileStamp(opened.path) : undefined };
}

/** A search's hits, an erase's or an import step's result. */
function answer(
  db: Database,
  work: Exclude<ThreadWork, { kind: "chunks" | "file" | "open" }>,
  busyWaitMs: number,
) {
  if (work.kind === "search") {
    const { stop } = work;
    return searchSessions(
      db,
      work.fts,
      work.userId,
      work.query,
      work.limit,
      () => Atomics.load(stop, 0) !== 0,
    );
  }
  if (work.kind === "erase") return whileLocked(db, busyWaitMs, (d) => runErase(d, work.work));
  return whileLocked(db, busyWaitMs, (d) => runV01(d, work.work));
}

/**
 * An erase (or a step of the 0.1 import) with the main connection's short busy wait (its log's
 * scrub must not wait seconds on each reader: store/erase.ts), another process's write lock
 * waited out here, as Store.write does.
 */
function whileLocked<T>(db: Database, busyWaitMs: number, work: (db: Database) => T): T {
  const deadline = Date.now() + busyWaitMs;
  db.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  try {
    for (let wait = 5; ; wait = Math.min(wait * 2, 100)) {
      try {
        return work(db);
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
