import { abortable } from "../util/abortable.ts";
import { backoffDelayMs } from "../util/backoff.ts";
import { withoutQuotes } from "../util/llama-quotes.ts";
import { logger } from "../util/logger.ts";
import { cannotEmbed, embedShortened, serverDied, tooLong } from "./embed-failures.ts";
import { type ChatsRunning, EmbedRoom, type Later } from "./embed-room.ts";
import type { QueryVector } from "./memory-vectors.ts";
import type { Store } from "./store.ts";

/** What `status.memory_index` shows (docs/protocol.md#status). */
export interface MemoryIndexProgress {
  embedded: number;
  total: number;
  model: string;
  /** Rows this model cannot embed, set aside (found by words alone), and why the last one was, this core's life. */
  set_aside: number;
  last_set_aside: { reason: SetAsideReason; message: string } | null;
}

/** Why a row was set aside without a vector (docs/agent.md, "Memory that understands meaning"). */
export type SetAsideReason = "too_long" | "crashes_server" | "not_finite" | "no_vector";

export interface MemoryEmbedderDeps {
  store: Store;
  /** The embedding model's name, as status shows it. */
  model: string;
  /**
   * The model's fingerprint now (its file's identity): vectors of another are never used. Its
   * stat is asked off the loop (a model on a dead network mount): rejects when it does not answer.
   */
  fingerprint(): string | Promise<string>;
  /**
   * One L2-normalized vector per text, in order (several models' `embed`); throws CoreError.
   * `spare`: an ask that takes free room only (runtime/scheduler.ts `acquire`): null when the
   * model was not loaded for it for want of free room.
   */
  embed(texts: string[], signal: AbortSignal, spare?: boolean): Promise<number[][] | null>;
  /** Tests: rows per request, the wait after a turn before embedding, the retry back-off. */
  batch?: number;
  settleMs?: number;
  retryMs?: { initial: number; max: number };
  /** Tests: how long chats are idle before the job takes their model's room, and its timer (embed-room.ts). */
  idleMs?: number;
  later?: Later;
  /** The chats running, the composition root's for every embedder it makes (embed-room.ts). */
  chats?: ChatsRunning;
}

/** Rows per embedding request: llama-server takes up to 1,024 inputs, but a batch is one wait. */
const BATCH = 32;
/** After a turn, the embedding waits this long: the result goes out first, and turns close together share a batch. */
const SETTLE_MS = 250;
/** After a failure (the model down, crashed, refusing), the next try's back-off. */
const RETRY_MS = { initial: 5_000, max: 300_000 };
/** A text past this many characters is cut before it is sent (the model's own limit may cut it further). */
const MAX_CHARS = 8_000;
/** Ids a document's rows are looked over in at a time (store/memory-vectors.ts `lackingIds`: ~3 ms). */
const LOOK_IDS = 1_000;

/**
 * Memory rows embedded off the turn's path (docs/agent.md, "Memory"): a job that embeds, in
 * batches and newest first, every `memory` row without a vector of the current embedding model
 * (turns, folder chunks, committed documents' chunks alike), writes the vectors through the store's write
 * (another core's lock waited for without blocking the loop), and yields the event loop between
 * batches. It runs after each turn (a short wait first), when the store opens, and after a
 * failure with back-off; a changed model re-embeds everything this way. Failures never reach a
 * chat: recall goes on by words alone until the vectors are there.
 */
export class MemoryEmbedder {
  private running: Promise<void> | undefined;
  private again = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  private stopped = false;
  private readonly abort = new AbortController();
  private counts: { embedded: number; total: number } | undefined;
  private setAside = 0;
  private lastSetAside: MemoryIndexProgress["last_set_aside"] = null;
  private readonly batch: number;
  private readonly settleMs: number;
  private readonly retryMs: { initial: number; max: number };
  private readonly room: EmbedRoom;

  constructor(private readonly deps: MemoryEmbedderDeps) {
    this.room = new EmbedRoom(() => void this.run(), deps.idleMs, deps.later, deps.chats);
    this.batch = deps.batch ?? BATCH;
    this.settleMs = deps.settleMs ?? SETTLE_MS;
    this.retryMs = deps.retryMs ?? RETRY_MS;
  }

  /** status.memory_index: the counts as of the job's last look (no I/O). */
  progress(): MemoryIndexProgress {
    return {
      embedded: this.counts?.embedded ?? 0,
      total: this.counts?.total ?? 0,
      model: this.deps.model,
      set_aside: this.setAside,
      last_set_aside: this.lastSetAside,
    };
  }

  /** The counts status shows, read again. */
  private recount(fp: string): { embedded: number; total: number } {
    const { store } = this.deps;
    const { refused, ...counts } = store.guard(() => store.memory.vectors.tally(fp));
    this.counts = counts;
    this.setAside = refused;
    return counts;
  }

  /** Asks for a run after the settle wait (a run under way goes round again). */
  kick(delayMs = this.settleMs): void {
    if (this.stopped) return;
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, delayMs);
    this.timer.unref?.();
  }

  /** A chat begins (chat.ts): asks take free room only till chats idle (embed-room.ts); its end runs the job. */
  chatBegan(): () => void {
    const ended = this.room.chatBegan();
    return () => {
      ended();
      this.kick();
    };
  }

  /** Runs the job now and waits for it (tests, and a caller that wants it done). */
  run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.loop().finally(() => {
      this.running = undefined;
      if (this.again && !this.stopped) {
        this.again = false;
        this.kick(0);
      }
    });
    return this.running;
  }

  /**
   * The documents' hook (`Services.embedChunks`): embeds these rows now, reporting rows done of
   * all given. A failure of the model is logged and left to the job (the rows stay searchable
   * by words and get vectors later): the promise still resolves; only a cancel rejects.
   */
  async embedChunks(
    memoryRowIds: number[],
    onProgress: (done: number, total: number) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const total = memoryRowIds.length;
    const either = AbortSignal.any([signal, this.abort.signal]);
    const fp = await this.fingerprintNow(either).catch((err) => this.chunksFailed(err, signal));
    if (fp === undefined) return;
    const { store } = this.deps;
    // The document just committed now counts in status's total.
    this.recount(fp);
    const todo = await this.lackingOf(fp, memoryRowIds, signal);
    let done = total - todo.length;
    onProgress(done, total);
    try {
      for (let i = 0; i < todo.length; i += this.batch) {
        signal.throwIfAborted();
        const ids = todo.slice(i, i + this.batch);
        // Rows the background job embedded meanwhile are left out here.
        const rows = store.guard(() => store.memory.vectors.lacking(fp, ids.length, ids)).reverse();
        if (rows.length > 0) await this.embedRows(fp, rows, AbortSignal.any([signal, this.abort.signal]));
        done += ids.length;
        onProgress(done, total);
      }
    } catch (err) {
      return this.chunksFailed(err, signal);
    }
    if (!this.stopped) this.recount(fp);
  }

  /** A document's chunks not embedded: a cancel rejects; anything else is left to the job. */
  private chunksFailed(err: unknown, signal: AbortSignal): void {
    if (signal.aborted) throw signal.reason;
    if (this.stopped) return;
    // A 500 can quote the request, the user's text (docs/protocol.md: logs never do); so below.
    logger.warn(
      `memory: embedding a document's chunks failed (${withoutQuotes((err as Error).message)}); tried again later`,
    );
    this.retryLater();
  }

  /** The fingerprint, its wait ended by `signal` (a stop, a cancel), not after the drive's 30 s. */
  private fingerprintNow(signal: AbortSignal): Promise<string> {
    return abortable(Promise.resolve(this.deps.fingerprint()), signal);
  }

  /**
   * Which of `ids` lack a vector: ids only, the text read a batch at a time later (a document
   * may be 13,000 chunks), looked over in slices with the event loop given back between.
   */
  private async lackingOf(fp: string, ids: number[], signal: AbortSignal): Promise<number[]> {
    const { store } = this.deps;
    const todo: number[] = [];
    for (let i = 0; i < ids.length; i += LOOK_IDS) {
      if (i > 0) await new Promise((r) => setImmediate(r));
      signal.throwIfAborted();
      todo.push(...store.guard(() => store.memory.vectors.lackingIds(fp, ids.slice(i, i + LOOK_IDS))));
    }
    return todo;
  }

  /**
   * The query's vector for recall; undefined when the model fails (recall then uses words alone).
   * An input longer than the model takes is shortened as a row is: a pasted page would otherwise
   * lose recall by meaning on every turn that sends it.
   */
  async queryVector(text: string, signal: AbortSignal): Promise<QueryVector | undefined> {
    // Spare: on a machine with room for one model, its load unloaded the chat's own model.
    const got = await embedShortened(this.deps.embed, [text.slice(0, MAX_CHARS)], signal, true);
    const vector = got?.[0];
    // Read once it came back: the model it was made by (a pull may have moved it meanwhile).
    const fingerprint = await this.fingerprintNow(signal);
    return vector && meaningful(vector) ? { fingerprint, vector } : undefined;
  }

  /** Shutdown: the request in flight aborted, no run started again. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.room.stop();
    if (this.timer) clearTimeout(this.timer);
    this.abort.abort();
    await this.running?.catch(() => {});
  }

  private async loop(): Promise<void> {
    const { store } = this.deps;
    let grant: AbortSignal | undefined;
    try {
      const fp = await this.fingerprintNow(this.abort.signal);
      // Counted once a run (then added to as vectors are stored): two counts of every row.
      const counts = this.recount(fp);
      // All embedded: the search for rows without a vector would read every row to say so.
      if (counts.embedded >= counts.total) {
        this.failures = 0;
        return;
      }
      // Each look goes on below the rows the pass has had: from the newest again, it stepped over
      // every row embedded so far, on this loop (90 ms a batch once 90,000 rows had vectors).
      for (let below: number | undefined; ; ) {
        if (this.stopped) return;
        const rows = store.guard(() => store.memory.vectors.lacking(fp, this.batch, undefined, below));
        if (rows.length === 0) {
          if (below === undefined) break;
          // Rows added while the pass went down (an erased row's id taken again) are above it.
          below = undefined;
          continue;
        }
        below = rows.at(-1)?.id;
        // Spare unless granted the room of idle chats (embed-room.ts): a chat beginning ends the grant.
        grant = this.room.ordinary();
        const signal = grant ? AbortSignal.any([this.abort.signal, grant]) : this.abort.signal;
        // Each row ends with a vector or refused, or this throws. (Rows erased meanwhile get none stored.)
        await this.embedRows(fp, rows, signal, !grant);
        // Caught up as counted: the look below would read every older row to find none (a chat's
        // one new row cost a pass over the whole table). Counted again to be sure: a row erased
        // meanwhile leaves the count ahead; then the pass goes on from the newest. That count is
        // the run's last: not counted a third time below.
        if (this.caughtUp(fp)) {
          this.failures = 0;
          return;
        }
        // The loop is given back between batches: a ping or a chat never waits for a backlog.
        await new Promise((r) => setImmediate(r));
      }
      this.failures = 0;
      // A run that caught up says so exactly (rows added or erased meanwhile included).
      this.recount(fp);
    } catch (err) {
      if (this.stopped) return;
      if (err instanceof ModelChanged) {
        this.again = true;
        return;
      }
      // No free room, or a chat took it back: not a failure; the rows wait for chats to be idle.
      if (err instanceof NoRoom || grant?.aborted) return this.room.refused();
      logger.warn(
        `memory: embedding failed (${withoutQuotes((err as Error).message)}); recall uses words alone until it works`,
      );
      this.retryLater();
    }
  }

  /** Whether every row has its vector (or refusal), as counted now; the counts kept. */
  private caughtUp(fp: string): boolean {
    if (!this.counts || this.counts.embedded < this.counts.total) return false;
    const counts = this.recount(fp);
    return counts.embedded >= counts.total;
  }

  /**
   * Embeds `rows` and stores their vectors. An input the server finds too long is shortened and
   * sent again; a batch that still fails so, or that holds an input the model cannot embed (it
   * crashed the server, or came back holding NaN), or whose server died with it in flight, is
   * sent a row at a time, and a row the model cannot take even alone and shortened, or that
   * crashed the server each of the last two times it was sent (server/embed-suspects.ts), or
   * whose vector held NaN, is marked refused, so one row never holds up the others
   * (docs/agent.md, "Memory that understands meaning"). Any other failure (the model down, a row
   * alone whose server died once) throws, for the batch to be tried again later.
   */
  private async embedRows(
    fp: string,
    rows: { id: number; text: string }[],
    signal: AbortSignal,
    spare = false,
  ) {
    let vectors: number[][] | null;
    try {
      const texts = rows.map((r) => r.text.slice(0, MAX_CHARS));
      vectors = await embedShortened(this.deps.embed, texts, signal, spare);
    } catch (err) {
      const died = serverDied(err);
      const unembeddable = cannotEmbed(err);
      if (tooLong(err) === undefined && !unembeddable && !died) throw err;
      if (rows.length > 1) {
        for (const row of rows) await this.embedRows(fp, [row], signal, spare);
        return;
      }
      if (died) throw err;
      return this.refuse(fp, rows, unembeddable ?? "too_long", (err as Error).message);
    }
    if (!vectors) throw new NoRoom();
    // The model changed while they were made (a pull moved its hf: reference and the server was
    // started again on the new file): not `fp`'s vectors. The run starts over under the new one.
    if ((await this.fingerprintNow(signal)) !== fp)
      throw new ModelChanged("the embedding model changed while it embedded them");
    const got = rows.map((r, i) => ({ id: r.id, text: r.text, vector: vectors[i] ?? [] }));
    const { store } = this.deps;
    const stored = await store.write(() =>
      store.memory.vectors.put(
        fp,
        got.filter((r) => meaningful(r.vector)),
      ),
    );
    if (this.counts) {
      const embedded = this.counts.embedded + stored;
      this.counts = { embedded, total: Math.max(this.counts.total, embedded) };
    }
    const empty = got.filter((r) => r.vector.length === 0);
    if (empty.length > 0) await this.refuse(fp, empty, "no_vector", "no vector came back");
    const zeros = got.filter((r) => r.vector.length > 0 && !meaningful(r.vector));
    if (zeros.length > 0)
      await this.refuse(fp, zeros, "no_vector", "a vector of zeros came back (a reranker's: pooling rank)");
  }

  /** Rows the model cannot embed, marked so no run asks for them again. */
  private async refuse(
    fp: string,
    rows: { id: number; text: string }[],
    reason: SetAsideReason,
    why: string,
  ): Promise<void> {
    const { store } = this.deps;
    const marked = await store.write(() => store.memory.vectors.refuse(fp, rows));
    if (marked > 0) {
      this.setAside += marked;
      this.lastSetAside = { reason, message: why };
      logger.warn(
        `memory: ${marked} row(s) left without a vector (${why}); recall finds them by words alone`,
      );
      if (this.counts) {
        const total = Math.max(this.counts.total - marked, this.counts.embedded);
        this.counts = { ...this.counts, total };
      }
    }
  }

  private retryLater(): void {
    this.failures++;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.kick(backoffDelayMs(this.failures, this.retryMs.initial, this.retryMs.max));
  }
}

/** The embedding model's fingerprint changed during a run: its vectors are not the run's model's. */
class ModelChanged extends Error {}

/** A spare ask found no free room for the embedding model (embed-room.ts). */
class NoRoom extends Error {}

/**
 * A vector that says something: not empty, not all zeros. A reranker's server (`--reranking` or
 * `--pooling rank` in extra_args) embeds every text as zeros (recording 118), equally near every
 * row: kept, a query's nearest would be the newest rows in scope, fused into every recall.
 */
function meaningful(vector: readonly number[]): boolean {
  return vector.some((x) => x !== 0);
}
