import { logger } from "../util/logger.ts";
import { type DocumentStore, ORPHAN_CHUNK_MS } from "./document-store.ts";

/** How long after the store opens the first pass runs: off a first chat's path. */
export const FIRST_SWEEP_MS = 5000;
/**
 * Chunk rows erased per transaction. FTS5's secure-delete makes each row cost about a third of
 * a millisecond here, so a batch holds the loop (and the write lock) for ~10 ms.
 */
export const SWEEP_ROWS = 32;
/** A pass that failed (the database locked past the wait, a full disk) is tried again this much later. */
const RETRY_MS = 60_000;

export interface SweepDeps {
  documents: DocumentStore;
  /** Store.write: a write, retried while another process holds the lock. */
  write: <T>(work: () => T) => Promise<T>;
  /** The erase settled (store/erase.ts `settleErase`): the log emptied, so no copy of the text is left in it. */
  settle: () => void;
  now: () => number;
}

/**
 * Chunk rows a killed core left (an add never committed: docs/agent.md "Documents") erased in
 * the background, without waiting for another add: a pass some seconds after the store opens,
 * and another when the youngest uncommitted add it saw is ORPHAN_CHUNK_MS old, since two cores
 * may share a data folder and the other's add in progress looks the same until then. A pass
 * deletes in small batches, each its own write, pausing between them as long as the batch took,
 * so a sweep of a whole book never holds the event loop for more than one batch.
 */
export class OrphanSweep {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private due = Number.POSITIVE_INFINITY;
  private running: Promise<number> | undefined;
  private stopped = false;

  constructor(private readonly deps: SweepDeps) {}

  /** A pass in `ms` (or sooner, if one is due sooner already). */
  schedule(ms: number): void {
    const at = this.deps.now() + ms;
    if (this.stopped || at >= this.due) return;
    clearTimeout(this.timer);
    this.due = at;
    this.timer = setTimeout(() => {
      this.due = Number.POSITIVE_INFINITY;
      void this.run();
    }, ms);
    // A sweep still to come never keeps the core alive.
    this.timer.unref?.();
  }

  /** Rows an add began at `at` may be left uncommitted: a pass once they are old enough. */
  expect(at: number): void {
    this.schedule(Math.max(0, at + ORPHAN_CHUNK_MS - this.deps.now()));
  }

  /** One pass now (joined if one runs); how many rows it erased. */
  run(): Promise<number> {
    this.running ??= this.pass().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private async pass(): Promise<number> {
    let removed = 0;
    try {
      const before = this.deps.now() - ORPHAN_CHUNK_MS;
      for (const doc of this.deps.documents.uncommitted()) {
        if (doc.at > before) {
          this.expect(doc.at);
          continue;
        }
        removed += await this.erase(doc.documentId);
      }
      if (removed > 0 && !this.stopped) this.deps.settle();
    } catch (err) {
      if (this.stopped) return removed;
      logger.warn(
        `uncommitted document chunks could not be swept (${(err as Error).message}); trying again later`,
      );
      this.schedule(RETRY_MS);
      return removed;
    }
    if (removed > 0) logger.info(`swept ${removed} chunk rows of document adds that never finished`);
    return removed;
  }

  /** One orphaned document's rows, a batch at a time (DocumentStore.discard). */
  private async erase(documentId: string): Promise<number> {
    let removed = 0;
    while (!this.stopped) {
      const started = performance.now();
      const n = await this.deps.write(() => this.deps.documents.discard(documentId, SWEEP_ROWS));
      removed += n;
      if (n < SWEEP_ROWS) break;
      // As long as the batch held the loop and the lock, both are left free.
      await new Promise((r) => setTimeout(r, Math.max(1, performance.now() - started)));
    }
    return removed;
  }
}
