import type { Database } from "bun:sqlite";
import { join } from "node:path";
import { logger } from "../util/logger.ts";
import { whileBusy } from "./busy-retry.ts";
import { ChunkThread } from "./chunk-thread.ts";
import { Conversations } from "./conversations.ts";
import { DB_FILE, openStore, storeError } from "./db/open.ts";
import { asTold, clearResetNote, untoldResets } from "./db/reset-note.ts";
import { DbIdentity } from "./db-identity.ts";
import { DiskReserve } from "./disk-reserve.ts";
import { DocumentStore, type PendingDocument } from "./document-store.ts";
import { forgetScrub, rewriteOwed, scrubWal, truncateWal } from "./erase.ts";
import type { CopyOutcome } from "./erase-copies.ts";
import { EraseQueue } from "./erase-queue.ts";
import { type EraseResult, type EraseWork, type OffLoopWrite, runErase } from "./erase-work.ts";
import { ErasureWatch, erasedSince } from "./erasures.ts";
import { type ExportFormat, type ExportPieces, slicedExport } from "./export.ts";
import { FolderIndex } from "./folder-index.ts";
import { editErase, runV01, startImport, type V01Result, type V01Work } from "./import-v01-run.ts";
import { MemoryStore } from "./memory-store.ts";
import type { SessionSummary } from "./message-rows.ts";
import { discardPaced, FIRST_SWEEP_MS, OrphanSweep } from "./orphan-sweep.ts";
import { goneSources } from "./quoted-sources.ts";
import { type Leased, SessionLeases } from "./session-lease.ts";
import { sessionNotFound } from "./session-not-found.ts";
import { listSessions, type MessagePage, type SessionPage, sessionPage } from "./session-pages.ts";
import { notErasedSince, type SearchHit, searchSessions } from "./session-search.ts";
import type { StoreOptions, StoreReset } from "./store-options.ts";

export type { StoreOptions, StoreReset } from "./store-options.ts";

/** How long the search thread waits for the next search before it stops (its memory back). */
const SEARCH_IDLE_MS = 30_000;
/** How long a write keeps trying while another process holds the database's write lock. */
export const BUSY_WAIT_MS = 5000;

/**
 * The core's one connection to its database (docs/protocol.md#conversations-sessions-and-usersdelete):
 * sessions, messages, checkpoints, memory, leases. Opened on first need (never on the start-up
 * path), closed at shutdown with the write-ahead log folded back in.
 */
export class Store {
  readonly conversations: Conversations;
  readonly memory: MemoryStore;
  /** Documents handed to the assistant (store/document-store.ts). */
  readonly documents: DocumentStore;
  /** memory.folders, indexed in the background from the first open (store/folder-index.ts). */
  readonly folderIndex: FolderIndex;
  readonly leases: SessionLeases;
  /** The chunks of adds a killed core left, erased in the background (store/orphan-sweep.ts). */
  readonly orphans: OrphanSweep;
  readonly fts: boolean;
  readonly path: string;
  /** This process's turns, stopped when their session is erased (store/erasures.ts). */
  readonly erasing: ErasureWatch;
  private resets: StoreReset[];
  private closed = false;
  /** `stop` was called: the 0.1 import begins no further unit. */
  private stopping = false;
  private imported: Promise<void> = Promise.resolve();
  private readonly busyWaitMs: number;
  private readonly now: () => Date;
  /** Room for erasing on a full disk (store/disk-reserve.ts). */
  private readonly reserve: DiskReserve;
  /** Where documents' chunks are written and erases run (store/chunk-thread.ts); none: on this thread. */
  private readonly chunkThread: ChunkThread | undefined;
  /** Where `sessions.search` runs, stopped after 30 s unasked; none (tests): on this thread. */
  private readonly searchThread: ChunkThread | undefined;
  /** This core's erases, one after another; its other writes wait for them (`afterErases`). */
  private readonly erases = new EraseQueue();
  /** The file opened: one removed or replaced meanwhile is noticed (`stale`). */
  private readonly file: DbIdentity;

  private constructor(
    private readonly db: Database,
    private readonly dataDir: string,
    opened: { path: string; fts: boolean; resetFrom?: string; resetProblem?: string },
    options: StoreOptions,
  ) {
    this.path = opened.path;
    this.erasing = options.erasing ?? new ErasureWatch();
    this.file = new DbIdentity(opened.path);
    this.fts = opened.fts;
    this.conversations = new Conversations(db);
    this.memory = new MemoryStore(db, opened.fts, options.folders ?? []);
    this.documents = new DocumentStore(db);
    const busyWaitMs = options.busyWaitMs ?? BUSY_WAIT_MS;
    this.folderIndex = new FolderIndex(db, options.folders ?? [], { busyWaitMs, ...options.folderIndex });
    this.leases = new SessionLeases(db, options.leases);
    this.orphans = new OrphanSweep({
      documents: this.documents,
      discard: (documentId, stopped) => this.discardAdd(documentId, stopped),
      now: () => this.now().getTime(),
    });
    this.busyWaitMs = busyWaitMs;
    this.now = options.now ?? (() => new Date());
    this.reserve = new DiskReserve(join(dataDir, `${DB_FILE}.reserve`), options.reserveBytes);
    const thread = options.chunkThread !== false;
    this.chunkThread = thread ? new ChunkThread(this.path, this.busyWaitMs) : undefined;
    this.searchThread = thread ? new ChunkThread(this.path, this.busyWaitMs, SEARCH_IDLE_MS) : undefined;
    this.resets = untoldResets(opened.path, opened.resetFrom, opened.resetProblem);
  }

  static open(dataDir: string, options: StoreOptions = {}): Store {
    const opened = openStore(dataDir, options);
    const store = new Store(opened.db, dataDir, opened, options);
    store.reserve.ensure();
    // A core that died after an erase (or owing its log's scrub) left the log as it was; a rewrite
    // of the pages an erase owes runs as an erase does, off this loop (seconds on a big database).
    try {
      scrubWal(opened.db);
      if (rewriteOwed(opened.db))
        void store.erases.add(() => store.offLoop({ kind: "owed" })).catch(() => {});
    } catch (err) {
      logger.warn(`the database's write-ahead log could not be emptied at open: ${(err as Error).message}`);
    }
    // Off this loop, first in the erase queue: a delete asked meanwhile erases after it.
    store.imported = startImport(opened.db, {
      dataDir,
      now: store.now,
      beforeUnit: options.beforeImportUnit,
      run: (w) => store.v01(w),
      stopped: () => store.stopping || store.closed,
      queue: (job) => store.erases.add(job),
    });
    if (!opened.fts) logger.warn("this SQLite has no FTS5: search and memory use a plain LIKE match");
    // Off the hot path from the first open, so a first chat finds as much indexed as can be.
    void store.folderIndex.start();
    store.orphans.schedule(options.firstSweepMs ?? FIRST_SWEEP_MS);
    return store;
  }

  /** The resets of an unusable database (this process's, or noted and never told), oldest first, handed out once; the note goes. */
  takeResets(): StoreReset[] {
    const resets = this.resets;
    this.resets = [];
    if (resets.length > 0) clearResetNote(this.path);
    return resets.map(asTold);
  }

  /**
   * Runs a write; while another process holds the write lock it is tried again, without
   * blocking the event loop, for up to BUSY_WAIT_MS; then a CoreError naming the file. It waits
   * first for this core's own erase, which holds the write lock far longer than that (a wait
   * `signal` ends, the work then not run).
   */
  async write<T>(work: () => T, signal?: AbortSignal): Promise<T> {
    await this.afterErases(signal);
    return this.writeNow(work);
  }

  /** Resolves once no erase of this core is running (a new one may start after); rejects once `signal` aborts. */
  afterErases(signal?: AbortSignal): Promise<void> {
    return this.erases.idle(signal);
  }

  private async writeNow<T>(work: () => T): Promise<T> {
    try {
      return await whileBusy(work, this.busyWaitMs);
    } catch (err) {
      throw storeError(err, this.path, this.closed);
    }
  }

  /**
   * One batch of a document's chunks (DocumentStore.addChunks), on the chunk thread when there is one; on this
   * one, through `write`, with the lock then left free as long as the batch held it (another core's writes get in).
   */
  async writeChunks(doc: PendingDocument, chunks: { index: number; text: string }[]): Promise<void> {
    if (this.chunkThread) return this.chunkThread.write(doc, chunks);
    const started = performance.now();
    await this.write(() => this.documents.addChunks(doc, chunks));
    await new Promise((r) => setTimeout(r, Math.max(1, performance.now() - started)));
  }

  /**
   * Resolves once the 0.1 folder's import, if one runs, is done or given up: the reads wait for it
   * (methods/sessions.ts); writes, leases and erases in the erase queue.
   */
  whenImported(): Promise<void> {
    return this.imported;
  }

  /** A step of the 0.1 import, or an erase of its files, on the store's thread (or here without one). */
  private v01(work: V01Work): Promise<V01Result> {
    if (this.chunkThread) return this.chunkThread.v01(work);
    return this.writeNow(() => runV01(this.db, work, this.conversations));
  }

  /** Runs a read or a short write now; SQLite's failures become errors naming the file. */
  guard<T>(work: () => T): T {
    try {
      return work();
    } catch (err) {
      throw storeError(err, this.path, this.closed);
    }
  }

  /** Waits for the session's lease (this core's erases first, the wait ended by `signal`), with `within` run in the same write (store/session-lease.ts `acquire`); a database locked too long fails naming the file. */
  lease<T>(userId: string, sessionId: string, signal: AbortSignal, within: () => T): Promise<Leased<T>> {
    const wait = this.busyWaitMs;
    return this.named(
      this.afterErases(signal).then(() => this.leases.acquire(userId, sessionId, signal, within, wait)),
    );
  }

  /** As `lease`, but undefined at once when another core's turn holds the session. */
  tryLease<T>(
    userId: string,
    sessionId: string,
    signal: AbortSignal,
    within: () => T,
  ): Promise<Leased<T> | undefined> {
    const wait = this.busyWaitMs;
    return this.named(
      this.afterErases(signal).then(() => this.leases.tryHold(userId, sessionId, signal, within, wait)),
    );
  }

  /** SQLite's failures as errors naming the file. */
  private async named<T>(work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (err) {
      throw storeError(err, this.path, this.closed);
    }
  }

  list(userId: string, limit: number, before?: string): SessionPage {
    return this.guard(() => listSessions(this.db, userId, limit, before));
  }

  get(userId: string, sessionId: string, limit: number, beforeSeq?: number): MessagePage {
    const find = () => this.mustFind(userId, sessionId);
    return this.guard(() => sessionPage(this.db, find, userId, limit, beforeSeq));
  }

  async rename(userId: string, sessionId: string, title: string): Promise<SessionSummary> {
    if (!(await this.write(() => this.conversations.rename(userId, sessionId, title))))
      throw sessionNotFound(sessionId);
    return this.mustFind(userId, sessionId);
  }

  /**
   * Off the main loop: the full-text index holds no user, so a search scans every match of its
   * words, other users' too, before it has this user's (docs/performance.md). `signal`: `cancel`.
   */
  async search(userId: string, query: string, limit: number, signal?: AbortSignal): Promise<SearchHit[]> {
    if (!this.searchThread) return this.guard(() => searchSessions(this.db, this.fts, userId, query, limit));
    const mark = this.guard(() => this.conversations.erasureMark());
    const hits = await this.searchThread.search(this.fts, userId, query, limit, signal);
    return this.guard(() => notErasedSince(this.db, userId, hits, mark));
  }

  /** A session's export in pieces (store/export.ts `slicedExport`); `confirm` throws once it was deleted since. */
  exportPieces(userId: string, sessionId: string, format: ExportFormat): ExportPieces {
    // Found again before each slice and by `confirm`: a delete since this call fails it, though a chat made it again.
    const mark = this.guard(() => this.conversations.erasureMark());
    const find = () => {
      if (this.guard(() => erasedSince(this.db, userId, sessionId, mark))) throw sessionNotFound(sessionId);
      return this.mustFind(userId, sessionId);
    };
    return slicedExport(format, userId, find, (read) => this.guard(() => read(this.db)));
  }

  /**
   * A session's messages, checkpoint and memory, erased for good, here, in its 0.1 files and in
   * every database set aside; `deleted` false when the live database had none. The erase runs on
   * the store's thread, one transaction, after the copies and 0.1 files: a delete sent again
   * (the core killed midway) finds the session only while its live rows are there (docs/agent.md).
   */
  async deleteSession(
    userId: string,
    sessionId: string,
  ): Promise<{ deleted: boolean; copies: CopyOutcome[] }> {
    // A turn of it in flight here stops now; one in another core is refused at its next write.
    this.erasing.erased(userId, sessionId);
    const at = this.now().getTime();
    return this.erases.add(async () => {
      await this.v01({ kind: "erase", dataDir: this.dataDir, userId, sessionId });
      const copies = await this.eraseCopies(userId, { sessionId });
      const deleted = (await this.erase({ kind: "session", userId, sessionId, at, steps: false })) > 0;
      this.conversations.forget(userId, sessionId);
      return { deleted, copies };
    });
  }

  /** Of the sources memory notes quote (with their passages' rows), those no longer stored (store/quoted-sources.ts). */
  sourcesGone(userId: string, quoted: ReadonlyMap<string, readonly number[]>): string[] {
    return this.guard(() => goneSources(this.db, userId, quoted));
  }

  /** A document erased for good (`documents.delete`), the copies first as deleteSession's, held live or not (after a reset, only a copy set aside may hold it); false when the live database has none. Recall's word counts are dropped after it: made of its chunks too, they would rule recalls ten minutes (no erase's number tells of it). */
  async deleteDocument(userId: string, documentId: string): Promise<boolean> {
    return this.erases.add(async () => {
      await this.eraseCopies(userId, { documentId });
      if (!this.guard(() => this.documents.find(userId, documentId))) return false;
      const removed = ((await this.offLoop({ kind: "document", userId, documentId })) as number) > 0;
      if (removed) this.memory.forgetCounts();
      return removed;
    });
  }

  /** All of a user's, erased so, the 0.1 files first; `deleted_sessions`: the live database's. */
  async deleteUser(userId: string): Promise<{ deleted_sessions: number; copies: CopyOutcome[] }> {
    this.erasing.erased(userId);
    const at = this.now().getTime();
    return this.erases.add(async () => {
      await this.v01({ kind: "erase", dataDir: this.dataDir, userId });
      const deleted_sessions = await this.erase({ kind: "user", userId, at, steps: false });
      this.conversations.forget(userId);
      return { deleted_sessions, copies: await this.eraseCopies(userId, {}) };
    });
  }

  /**
   * An erase in one transaction; on a full disk, the reserve's room freed and the erase done in
   * small steps (store/erase.ts), the reserve put back once the log is empty again.
   */
  private erase(work: Extract<EraseWork, { steps: boolean }>): Promise<number> {
    return this.reserve.orInSteps((steps) => this.offLoop({ ...work, steps }) as Promise<number>);
  }

  /** The same rows erased in the databases set aside (store/erase-copies.ts: a `quick_check` each). */
  private async eraseCopies(
    userId: string,
    of: { sessionId?: string; documentId?: string },
  ): Promise<CopyOutcome[]> {
    return (await this.offLoop({ kind: "copies", dataDir: this.dataDir, userId, ...of })) as CopyOutcome[];
  }

  /**
   * The pages' rewrite a write owes (a turn's staged images dropped: attachments.ts), done now, off
   * the loop as an erase is; none owed, nothing. `signal` ends its wait in line (it stays owed).
   */
  settleOwed(signal?: AbortSignal): Promise<unknown> {
    return this.erases.add(() => this.offLoop({ kind: "owed" }), signal);
  }

  /** An edit's commit (it erases the tail it replaces, from the kept 0.1 files first: import-v01-run.ts `editErase`), a long turn's, a long input's checkpoint: off the loop as an erase is (`signal`: EraseQueue.add). */
  writeOffLoop(work: OffLoopWrite, signal?: AbortSignal): Promise<number> {
    const edit = editErase(this.dataDir, work);
    const job = () => (edit ? this.v01(edit) : Promise.resolve()).then(() => this.offLoop(work));
    return this.erases.add(job, signal) as Promise<number>;
  }

  /**
   * An unfinished add's chunk rows erased a batch at a time on the store's thread
   * (store/orphan-sweep.ts `discardPaced`); on a full disk, which such an add may have filled
   * itself, as an erase is: with the reserve's room, the log emptied around each batch. Recall's
   * word counts are dropped after it, as after deleteDocument: a recall counts uncommitted rows too.
   */
  discardAdd(documentId: string, stopped?: () => boolean): Promise<number> {
    const batch = (steps: boolean) => (id: string, rows: number, removedBefore: number) =>
      this.offLoop({ kind: "discard", documentId: id, rows, removedBefore, steps }) as Promise<number>;
    const discarded = this.reserve.orInSteps((steps) => discardPaced(batch(steps), documentId, stopped));
    return discarded.finally(() => this.memory.forgetCounts());
  }

  /** An erase on the store's thread (the main loop keeps answering), or here without one. */
  private offLoop(work: EraseWork): Promise<EraseResult> {
    // A commit there leaves the history cached here stale, and an edit's erased tail in it.
    if (this.chunkThread) return this.chunkThread.erase(work).finally(() => this.conversations.uncache(work));
    if (work.kind === "commit") return this.writeNow(() => this.conversations.commitTurn(work.turn));
    return this.writeNow(() => runErase(this.db, work));
  }

  mustFind(userId: string, sessionId: string): SessionSummary {
    const s = this.guard(() => this.conversations.session(userId, sessionId));
    if (!s) throw sessionNotFound(sessionId);
    return s;
  }

  /** Why this store should give way to a new one at its path (db-identity.ts: removed, replaced, writable again), or undefined. */
  stale(): string | undefined {
    return this.closed ? undefined : this.file.stale();
  }

  /** At shutdown: an erase under way, and an unfinished add's removal, end first (the user asked for them); then the close. */
  async stop(): Promise<void> {
    this.stopping = true;
    await this.documents.discarding.idle();
    await this.afterErases();
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.folderIndex.stop();
    this.orphans.stop();
    this.chunkThread?.stop();
    this.searchThread?.stop();
    try {
      truncateWal(this.db);
    } catch {}
    forgetScrub(this.db);
    this.db.close(false);
  }
}
