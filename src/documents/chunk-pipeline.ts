import type { PendingDocument } from "../store/document-store.ts";
import type { Store } from "../store/store.ts";
import { nextTurn } from "../util/next-turn.ts";
import type { Chunk } from "./chunk.ts";

/** Chunks stored per write: each batch holds the database a few milliseconds. */
export const STORE_BATCH = 64;
/** Batches written but not yet answered, at most: the reader waits past that. */
const MAX_IN_FLIGHT = 4;

/**
 * A document's chunks on their way into the store while the rest is still read
 * (docs/agent.md "Documents"): batches of STORE_BATCH handed to `Store.writeChunks` (the chunk
 * thread, where FTS5's work runs beside pdf.js's), at most MAX_IN_FLIGHT out at once. The
 * first failure is kept and thrown at the next `add` or at `finish`; `settle` waits for every
 * batch to end, so nothing lands after the caller discards what was stored.
 */
export class ChunkPipeline {
  private readonly waiting: Chunk[] = [];
  private readonly inFlight: Promise<void>[] = [];
  private outstanding = 0;
  private wake: (() => void) | undefined;
  private failure: { err: unknown } | undefined;
  /** Chunks the store has taken. */
  stored = 0;
  /** Some batch was sent: rows of it may be in the store. */
  started = false;

  constructor(
    private readonly store: Store,
    private readonly doc: PendingDocument,
    private readonly signal: AbortSignal,
    private readonly now: () => number = Date.now,
  ) {}

  /** The reader's newest chunks; full batches go out, and the loop gets a turn. */
  async add(chunks: Chunk[]): Promise<void> {
    this.check();
    this.waiting.push(...chunks);
    // Each batch waits for room: a slice of one-word headings makes thousands of chunks, which
    // all went out at once, hundreds of transactions queued on the thread past any cancel.
    while (this.waiting.length >= STORE_BATCH) await this.sendInTurn();
    await nextTurn();
  }

  /** The rest sent, and every batch answered; `onStored` hears each as it ends. */
  async finish(onStored: (stored: number) => void): Promise<void> {
    this.check();
    // The last, partial batch waits for room too: four full ones may still be out.
    while (this.waiting.length > 0) await this.sendInTurn();
    for (const batch of this.inFlight) {
      await batch;
      this.check();
      onStored(this.stored);
    }
  }

  /** Every batch ended, however. */
  async settle(): Promise<void> {
    await Promise.all(this.inFlight);
  }

  /** The next batch sent once fewer than MAX_IN_FLIGHT are out, unless a cancel or a failure came meanwhile. */
  private async sendInTurn(): Promise<void> {
    while (this.outstanding >= MAX_IN_FLIGHT)
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    this.check();
    this.send();
  }

  private send(): void {
    const batch = this.waiting.splice(0, STORE_BATCH).map(storedChunk);
    // The rows are dated from the first one stored, not from the request: the sweep of a killed
    // core's adds (store/orphan-sweep.ts) judges an add by its rows' age, and an add may wait
    // its turn (the reading budget, the PDF thread) past ORPHAN_CHUNK_MS before it stores any.
    if (!this.started) this.doc.at = this.now();
    this.started = true;
    this.outstanding++;
    const written = this.store.writeChunks(this.doc, batch).then(
      () => {
        this.stored += batch.length;
      },
      (err: unknown) => {
        this.failure ??= { err };
      },
    );
    this.inFlight.push(
      written.then(() => {
        this.outstanding--;
        this.wake?.();
      }),
    );
  }

  private check(): void {
    if (this.failure) throw this.failure.err;
    this.signal.throwIfAborted();
  }
}

/** A chunk as memory keeps it: under its headings, so a search for a section's title finds it. */
function storedChunk(c: Chunk): { index: number; text: string } {
  return {
    index: c.index,
    text: c.heading_path.length > 0 ? `${c.heading_path.join(" › ")}\n${c.text}` : c.text,
  };
}
