import { logger } from "../util/logger.ts";
import { type DocumentStore, ORPHAN_CHUNK_MS } from "./document-store.ts";

/** How long after the store opens the first pass runs: off a first chat's path. */
export const FIRST_SWEEP_MS = 5000;
/**
 * Chunk rows erased per transaction. FTS5's secure-delete makes each row cost from a third of a
 * millisecond to several here (by how many distinct words it holds: 1.5 KB of varied prose, ~4),
 * so a batch holds the store's thread (and the write lock) for ~10–150 ms.
 */
export const SWEEP_ROWS = 32;
/** Documents a pass looks at between turns of the loop (two index seeks each, ~1.5 ms for 256). */
export const SWEEP_DOCS = 256;
/** A pass that failed (the database locked past the wait, a full disk) is tried again this much later. */
const RETRY_MS = 60_000;

/** One batch of an add's rows erased, the log emptied after the last; how many. */
export type DiscardBatch = (documentId: string, rows: number, removedBefore: number) => Promise<number>;

export interface SweepDeps {
  documents: DocumentStore;
  /** All of an unfinished add's rows erased (Store.discardAdd: `discardPaced`); how many. */
  discard: (documentId: string, stopped: () => boolean) => Promise<number>;
  now: () => number;
}

/**
 * The chunk rows of an add that never committed, erased a batch at a time (on the store's thread
 * where there is one: FTS5's secure-delete costs milliseconds a row), the lock left free between
 * batches as long as each held it, so the core's other writes and another core's get in; the log
 * emptied after the last, so the text is in no file. How many rows.
 */
export async function discardPaced(
  discard: DiscardBatch,
  documentId: string,
  stopped: () => boolean = () => false,
): Promise<number> {
  let removed = 0;
  while (!stopped()) {
    const started = performance.now();
    const n = await discard(documentId, SWEEP_ROWS, removed);
    removed += n;
    if (n < SWEEP_ROWS) break;
    await new Promise((r) => setTimeout(r, Math.max(1, performance.now() - started)));
  }
  return removed;
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
      for (let after: string | null = ""; after !== null && !this.stopped; ) {
        const slice = this.deps.documents.uncommitted(after, SWEEP_DOCS);
        for (const doc of slice.found) {
          // This core's own add in progress: it commits, or discards its rows itself.
          if (this.deps.documents.adding.has(doc.documentId)) continue;
          if (doc.at > before) {
            this.expect(doc.at);
            continue;
          }
          removed += await this.deps.discard(doc.documentId, () => this.stopped);
        }
        after = slice.last;
        // The loop turns between slices: a library of 20,000 documents took ~110 ms in one go.
        if (after !== null) await new Promise((r) => setImmediate(r));
      }
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
}
