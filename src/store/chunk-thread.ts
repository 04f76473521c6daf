import { CoreError, type ErrorCode } from "../protocol/errors.ts";
import { workerEntry } from "../util/worker-entry.ts";
import type { FileVerdict } from "./db/file-check.ts";
import type { FileStamp } from "./db/file-stamp.ts";
import { storeClosed, storeError } from "./db/open.ts";
import type { PendingDocument } from "./document-store.ts";
import type { EraseResult, EraseWork } from "./erase-work.ts";
import type { V01Result, V01Work } from "./import-v01-run.ts";
import type { SearchHit } from "./session-search.ts";

/**
 * The store's worker thread (`chunk-worker.ts`), with a connection of its own, for the writes
 * too slow for the main loop. A document's chunks (docs/agent.md "Documents"): FTS5's tokenizing
 * is most of what storing a document costs (a 300-page book: about half of what pdf.js takes to
 * read it), and on its own thread it runs beside the reading instead of after it. Erases
 * (store/erase-work.ts): FTS5's `secure-delete` makes them cost seconds. The worker starts on the
 * first ask and is kept; one that stops fails what it had, and the next ask starts another. The
 * 0.1 folder's import (store/import-v01-run.ts), a unit at a time, and its erases too. `doctor`'s
 * read of the whole file (store/db/file-check.ts), on a thread of its own with no store open.
 */
export type ThreadWork =
  | { kind: "chunks"; doc: PendingDocument; chunks: { index: number; text: string }[] }
  | { kind: "erase"; work: EraseWork }
  | { kind: "search"; fts: boolean; userId: string; query: string; limit: number; stop: Int32Array }
  | { kind: "v01"; work: V01Work }
  | { kind: "file" }
  | { kind: "open"; dataDir: string; withoutFts: boolean };

/**
 * What the thread's open (db/migrate-ahead.ts) answers: the reset it made, if it made one, and the
 * file as it left it when its `quick_check` read it whole (the main open then does not again).
 */
export type OpenedAhead = { reset?: { aside: string; problem: string }; checked?: FileStamp } | undefined;

export interface ChunkAsk {
  id: number;
  path: string;
  busyWaitMs: number;
  work: ThreadWork;
}

type Answered = EraseResult | SearchHit[] | V01Result | FileVerdict | OpenedAhead;

export type ChunkAnswer =
  | { id: number; ok: true; value?: Answered }
  | {
      id: number;
      ok: false;
      error: { name: string; message: string; code?: string; data?: Record<string, unknown> };
    };

const workerFile = () =>
  workerEntry("./store/chunk-worker.ts", new URL("./chunk-worker.ts", import.meta.url));

/** What `data.problem` says when the thread ended with work unanswered (migrate-first.ts opens on the loop then). */
export const THREAD_STOPPED = "thread_stopped";

/**
 * The thread crashed or exited with work unanswered: named, never a stack trace in the core's log
 * and "see the core's log" for the host; nothing it had was committed past its last transaction.
 */
export function threadStopped(path: string, why: string): CoreError {
  return new CoreError(
    "internal_error",
    `the store's thread for ${path} stopped (${why}) before it answered; send it again`,
    { key: "app.data_dir", path, problem: THREAD_STOPPED },
  );
}

export class ChunkThread {
  private worker: Worker | undefined;
  private readonly pending = new Map<
    number,
    { resolve: (value: Answered | undefined) => void; reject: (err: Error) => void }
  >();
  private nextId = 1;
  /** Closed with its store: a request that still holds the store is refused, no worker started. */
  private stopped = false;

  /** Set while a thread with an idle limit has nothing to do: it stops when this fires. */
  private idle: ReturnType<typeof setTimeout> | undefined;

  /** `idleStopMs`: a thread asked seldom (the searches') stops after so long with nothing to do. `makeWorker`: tests. */
  constructor(
    private readonly path: string,
    private readonly busyWaitMs: number,
    private readonly idleStopMs?: number,
    private readonly makeWorker: () => Worker = () => new Worker(workerFile()),
  ) {}

  /** One batch, in its own transaction on the thread (DocumentStore.addChunks). */
  async write(doc: PendingDocument, chunks: { index: number; text: string }[]): Promise<void> {
    await this.ask({ kind: "chunks", doc, chunks });
  }

  /** One erase, its transactions on the thread (Store's deletes); what it answers. */
  async erase(work: EraseWork): Promise<EraseResult> {
    return (await this.ask({ kind: "erase", work })) as EraseResult;
  }

  /**
   * `sessions.search` (store/session-search.ts) on the thread's connection: a search's scan never
   * holds the main loop. `signal` rejects it at once with its reason, and the thread, told by a
   * shared flag, skips it if it waits behind another or stops it at its next page.
   */
  async search(
    fts: boolean,
    userId: string,
    query: string,
    limit: number,
    signal?: AbortSignal,
  ): Promise<SearchHit[]> {
    signal?.throwIfAborted();
    const stop = new Int32Array(new SharedArrayBuffer(4));
    return (await this.ask({ kind: "search", fts, userId, query, limit, stop }, signal)) as SearchHit[];
  }

  /** One step of the 0.1 import, or its erase (store/import-v01-run.ts). */
  async v01(work: V01Work): Promise<V01Result> {
    return (await this.ask({ kind: "v01", work })) as V01Result;
  }

  /** `doctor`'s read-only check of the file (store/db/file-check.ts); the thread opens no connection of its own for it. */
  async checkFile(): Promise<FileVerdict> {
    return (await this.ask({ kind: "file" })) as FileVerdict;
  }

  /** The store's open, its pending migrations run here (db/migrate-ahead.ts); its connection closed after. */
  async openAhead(dataDir: string, withoutFts: boolean): Promise<OpenedAhead> {
    return (await this.ask({ kind: "open", dataDir, withoutFts })) as OpenedAhead;
  }

  /** Whether a worker runs now (tests: the idle stop). */
  get running(): boolean {
    return this.worker !== undefined;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.idle);
    this.worker?.terminate();
    this.worker = undefined;
    this.fail(storeClosed(this.path));
  }

  /** `signal` (a search's only): rejects it at once, and the shared flag tells the thread. */
  private ask(work: ThreadWork, signal?: AbortSignal): Promise<Answered | undefined> {
    // A store the core dropped (services.ts dropStore) may still be held by a request under way:
    // a worker started for it would write through a closed store and never be stopped.
    if (this.stopped) return Promise.reject(storeClosed(this.path));
    clearTimeout(this.idle);
    const worker = this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const cancelled = () => {
        if (work.kind === "search") Atomics.store(work.stop, 0, 1);
        if (this.pending.delete(id)) reject(signal?.reason);
      };
      // Its answer (or the thread's end) drops the listener: a long-lived signal keeps none.
      const settled = () => signal?.removeEventListener("abort", cancelled);
      this.pending.set(id, {
        resolve: (value) => {
          settled();
          resolve(value);
        },
        reject: (err) => {
          settled();
          reject(err);
        },
      });
      signal?.addEventListener("abort", cancelled, { once: true });
      worker.postMessage({ id, path: this.path, busyWaitMs: this.busyWaitMs, work } satisfies ChunkAsk);
    });
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    let worker: Worker;
    try {
      worker = this.makeWorker();
    } catch (err) {
      // No thread could be made (the system out of threads): named as one that stopped, so the
      // migration takes its one try on the loop (migrate-first.ts), not a raw error every time.
      throw threadStopped(this.path, `it could not be started: ${(err as Error).message}`);
    }
    // A worker left running never keeps the core alive.
    worker.unref();
    worker.onmessage = (event: MessageEvent<ChunkAnswer>) => {
      const a = event.data;
      const p = this.pending.get(a.id);
      // None for a search cancelled before it answered: already rejected.
      this.pending.delete(a.id);
      if (p && a.ok) p.resolve(a.value);
      else if (p && !a.ok) p.reject(this.errorOf(a.error));
      if (this.pending.size === 0 && this.idleStopMs !== undefined) this.stopWhenIdle(worker);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      if (this.worker === worker) this.worker = undefined;
      worker.terminate();
      this.fail(threadStopped(this.path, event.message));
    };
    // A thread that exits without a word (no `error`): what it had would wait forever.
    worker.addEventListener("close", () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      this.fail(threadStopped(this.path, "it exited"));
    });
    this.worker = worker;
    return worker;
  }

  private stopWhenIdle(worker: Worker): void {
    this.idle = setTimeout(() => {
      if (this.worker !== worker || this.pending.size > 0) return;
      this.worker = undefined;
      worker.terminate();
    }, this.idleStopMs);
    this.idle.unref();
  }

  private fail(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  /** The thread's error as the main loop's: a CoreError again, SQLite's named as the store names them. */
  private errorOf(e: Extract<ChunkAnswer, { ok: false }>["error"]): Error {
    if (e.name === "CoreError") return new CoreError(e.code as ErrorCode, e.message, e.data);
    return storeError(Object.assign(new Error(e.message), { code: e.code }), this.path);
  }
}
