import { logger } from "../../util/logger.ts";
import { jsonLine } from "../../util/long-text.ts";
import { nextTurn } from "../../util/next-turn.ts";
import { wholeCharCut } from "../../util/text-cut.ts";
import { within } from "../../util/within.ts";
import type { OutboundMessage } from "../messages.ts";
import { EventLines } from "./event-line.ts";

/** Where serialized batches go. `write` resolves once the sink accepted the batch. */
export interface Sink {
  /**
   * Takes one batch. Returns nothing when the sink accepted it at once, or a promise when the
   * writer must wait (backpressure); a failure throws or rejects.
   */
  write(data: string): void | Promise<void>;
  /** Reports a failure that surfaces after write() returned (e.g. EPIPE on a buffered write). */
  onFailure?(listener: (err: unknown) => void): void;
}

export interface WriterOptions {
  /** Messages held before events are dropped. */
  queueSize: number;
}

/**
 * Characters of answers held for a host that does not read them (queued, waiting for room, or in
 * the sink not yet taken) past which no more requests are read (`backlogFull`): counting messages
 * alone let a few big answers (an 8 MiB page of `sessions.get`, a 27 MB attachment) grow the
 * core by gigabytes before reading paused (a hostile review: 50 unread requests, +1.5 GB).
 */
export const MAX_HELD_CHARS = 64 * 1024 * 1024;

/**
 * The most characters handed to the sink in one write, the loop turning between two: a 20 MB
 * image's `sessions.attachment` answer (27 Mi characters) written whole held the main loop
 * 100-200 ms encoding it, a ping or a cancel unread meanwhile (docs/protocol.md#images).
 */
export const WRITE_SLICE_CHARS = 1024 * 1024;

/**
 * The one background writer of docs/protocol.md#output-buffering-the-writer: a bounded FIFO drained
 * in order, one sink write per drained batch. Events are best-effort (dropped when the queue is
 * full); results and errors wait for room. A broken sink is logged once and output is discarded
 * from then on, so request processing never depends on the host reading.
 */
export class Writer {
  private queue: Line[] = [];
  /** A sink write is in progress (its batch left the queue). */
  private writing = false;
  /** A microtask pump is scheduled. */
  private scheduled = false;
  private broken = false;
  private droppedTotal = 0;
  /** Terminals waiting for room, oldest first from waiterHead (a cheap FIFO without shift()). */
  private roomWaiters: (() => void)[] = [];
  private waiterHead = 0;
  private idleWaiters: (() => void)[] = [];
  /** Readers waiting for the terminals' backlog to shrink (`backlogFull`). */
  private backlogWaiters: (() => void)[] = [];
  private readonly lines = new EventLines();
  /** Characters of the lines queued, waiting for room or in the sink's hands (MAX_HELD_CHARS). */
  private held = 0;

  constructor(
    private readonly sink: Sink,
    private readonly options: WriterOptions,
  ) {
    sink.onFailure?.((err) => this.markBroken(err));
  }

  /** Applies a new queue size (the config loads after the loop starts). */
  setQueueSize(size: number): void {
    this.options.queueSize = size;
    this.wakeRoomWaiters();
  }

  /** Total events dropped since start. */
  get dropped(): number {
    return this.droppedTotal;
  }

  get isBroken(): boolean {
    return this.broken;
  }

  /** Queues an event; returns false when it was dropped because the queue was full. */
  event(msg: OutboundMessage): boolean {
    if (this.broken) return true;
    if (this.full()) return this.drop(msg.id, (msg as { event?: string }).event);
    this.enqueue(serialize(msg));
    return true;
  }

  /**
   * As `event` for `{...fields, id, type: "event", event}`, its line made without that object
   * (event-line.ts): the way of every streamed piece.
   */
  eventOf(id: unknown, event: string, fields: object): boolean {
    if (this.broken) return true;
    if (this.full()) return this.drop(id, event);
    const line = this.lines.line(id, event, fields);
    // An event that cannot be serialized is dropped (logged there); the request goes on.
    if (line !== undefined) this.enqueue(line);
    return true;
  }

  /**
   * No room for an event: the queue holds its count, or MAX_HELD_CHARS of answers are held for a
   * host that reads none. By the count alone, a raised `stdio.queue_size` and a frozen host kept
   * every big event of a stream, the core growing far past the characters' bound.
   */
  private full(): boolean {
    return this.queue.length >= this.options.queueSize || this.held >= MAX_HELD_CHARS;
  }

  private drop(id: unknown, event: string | undefined): false {
    this.droppedTotal++;
    logger.debug(`STDIO_WRITER_DROP id=${JSON.stringify(id)} event=${event}`);
    return false;
  }

  /**
   * Queues a result or error only if there is room now; false (nothing queued) otherwise.
   * Throws when the message cannot be serialized.
   */
  tryTerminal(msg: OutboundMessage): boolean {
    if (this.broken) return true;
    if (this.roomWaiters.length !== this.waiterHead || this.queue.length >= this.options.queueSize)
      return false;
    this.enqueue(serialize(msg));
    return true;
  }

  /** Queues a result or error, waiting (in arrival order) for room rather than dropping it. */
  terminal(msg: OutboundMessage): Promise<void> {
    const line = serialize(msg);
    if (this.broken) return Promise.resolve();
    if (this.roomWaiters.length === this.waiterHead && this.queue.length < this.options.queueSize) {
      this.enqueue(line);
      return Promise.resolve();
    }
    this.held += charsOf(line);
    return new Promise<void>((resolve) => {
      // The waker enqueues the line itself, so waiters keep their order and none re-checks.
      this.roomWaiters.push(() => {
        this.held -= charsOf(line);
        if (!this.broken) this.enqueue(line);
        resolve();
      });
    });
  }

  /**
   * A promise while a queue's worth of results and errors wait for room (none read by the host
   * for that long), resolved once fewer do; undefined when they do not. The transport reads no
   * more requests meanwhile: each would add an answer waiting in memory (600,000 pings grew the
   * core by 800 MB), so a host that writes without reading stdout is held back by its stdin pipe.
   */
  backlogFull(): Promise<void> | undefined {
    if (!this.backlogged) return undefined;
    return new Promise<void>((resolve) => this.backlogWaiters.push(resolve));
  }

  /** A queue's worth of terminals wait for room, or MAX_HELD_CHARS of lines, and output still goes somewhere. */
  private get backlogged(): boolean {
    if (this.broken) return false;
    return this.roomWaiters.length - this.waiterHead >= this.options.queueSize || this.held >= MAX_HELD_CHARS;
  }

  /** Resolves true once everything queued has reached the sink, false on timeout. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (this.isIdle()) return true;
    const idle = new Promise<boolean>((r) => this.idleWaiters.push(() => r(true)));
    return within(idle, timeoutMs, false);
  }

  private isIdle(): boolean {
    return this.broken || (this.queue.length === 0 && !this.writing);
  }

  private enqueue(line: Line): void {
    this.queue.push(line);
    this.held += charsOf(line);
    if (this.writing) return; // the running pump takes it with its next batch
    if (this.queue.length >= this.options.queueSize) {
      // Full while the sink is free: hand the batch over now rather than make callers wait.
      void this.pump();
    } else if (!this.scheduled) {
      this.scheduled = true;
      // A microtask lets every message produced in this tick join the same batch.
      queueMicrotask(() => {
        this.scheduled = false;
        void this.pump();
      });
    }
  }

  private async pump(): Promise<void> {
    if (this.writing) return;
    this.writing = true;
    while (this.queue.length > 0 && !this.broken) {
      const lines = this.queue;
      this.queue = [];
      this.wakeRoomWaiters();
      // One write a batch, as every streamed piece's batch always was: the slicing's generator,
      // arrays and closures are for a long batch or one in pieces only.
      const batch = oneWrite(lines);
      try {
        if (batch === undefined) await this.writeSliced(lines);
        else {
          // Only a sink that pushes back makes the writer wait; otherwise the loop goes on at once.
          const accepted = this.sink.write(batch);
          if (accepted) await accepted;
        }
      } catch (err) {
        this.markBroken(err);
      }
      this.held -= batch === undefined ? lines.reduce((n, l) => n + charsOf(l), 0) : batch.length;
      this.wakeRoomWaiters();
    }
    this.writing = false;
    if (this.broken) {
      this.queue = [];
      this.held = 0;
    }
    this.wakeRoomWaiters();
    const idle = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of idle) w();
  }

  /**
   * A long batch a slice a turn of the loop, in order: no other line is written until its last
   * slice is, so lines never mix.
   */
  private async writeSliced(lines: readonly Line[]): Promise<void> {
    let written = 0;
    for (const piece of writeSlices(lines)) {
      if (written > 0) await nextTurn();
      written += piece.length;
      const accepted = this.sink.write(piece);
      if (accepted) await accepted;
      if (this.broken) return;
    }
  }

  private markBroken(err: unknown): void {
    if (this.broken) return;
    this.broken = true;
    this.wakeRoomWaiters();
    const detail = err instanceof Error ? (err.stack ?? err.message) : String(err);
    logger.error(`ERROR_STACKTRACE stdout is closed or broken; further output is discarded: ${detail}`);
  }

  private wakeRoomWaiters(): void {
    while (
      this.waiterHead < this.roomWaiters.length &&
      (this.broken || this.queue.length < this.options.queueSize)
    ) {
      this.roomWaiters[this.waiterHead++]!();
    }
    if (this.waiterHead === this.roomWaiters.length) {
      this.roomWaiters = [];
      this.waiterHead = 0;
    }
    if (this.backlogWaiters.length > 0 && !this.backlogged) {
      const readers = this.backlogWaiters;
      this.backlogWaiters = [];
      for (const r of readers) r();
    }
  }
}

/** The batch as one string when it is plain lines within WRITE_SLICE_CHARS, else undefined. */
function oneWrite(lines: readonly Line[]): string | undefined {
  if (lines.length === 1) {
    const line = lines[0];
    return typeof line === "string" && line.length <= WRITE_SLICE_CHARS ? line : undefined;
  }
  let chars = 0;
  for (const line of lines) {
    if (typeof line !== "string") return undefined;
    chars += line.length;
    if (chars > WRITE_SLICE_CHARS) return undefined;
  }
  return lines.join("");
}

/**
 * A batch's lines as the sink takes them: joined up to WRITE_SLICE_CHARS, a longer line cut
 * into slices of it, never between the halves of a surrogate pair (the sink encodes each write
 * alone: a lone half would become U+FFFD).
 */
function* writeSlices(lines: readonly Line[]): Generator<string> {
  let group: string[] = [];
  let chars = 0;
  for (const line of lines.flat()) {
    if (chars + line.length > WRITE_SLICE_CHARS && group.length > 0) {
      yield group.join("");
      group = [];
      chars = 0;
    }
    if (line.length <= WRITE_SLICE_CHARS) {
      group.push(line);
      chars += line.length;
      continue;
    }
    for (let at = 0; at < line.length; ) {
      const end =
        at + WRITE_SLICE_CHARS >= line.length ? line.length : wholeCharCut(line, at + WRITE_SLICE_CHARS);
      yield line.slice(at, end);
      at = end;
    }
  }
  if (group.length > 0) yield group.join("");
}

/** A message's line: one string, or in pieces (a LongText's, util/long-text.ts), written in order. */
type Line = string | readonly string[];

const charsOf = (line: Line): number =>
  typeof line === "string" ? line.length : line.reduce((n, p) => n + p.length, 0);

function serialize(msg: OutboundMessage): Line {
  return jsonLine(msg);
}

/**
 * The production sink: process.stdout as a Node stream. A write it buffers below its
 * high-water mark is accepted at once; `false` from write() means wait for 'drain'. Failures
 * (EPIPE when the host closed its end) arrive through the write callback or 'error' and are
 * reported once via onFailure; Bun's FileSink was not used because a failed automatic flush
 * rejects a promise nobody holds, which crashes the process.
 */
export function stdoutSink(stream: NodeJS.WriteStream = process.stdout): Sink {
  let failure: unknown;
  const listeners: ((err: unknown) => void)[] = [];
  const fail = (err: unknown) => {
    if (failure !== undefined) return;
    failure = err;
    for (const l of listeners) l(err);
  };
  // Without a listener an 'error' event would be thrown as uncaught.
  stream.on("error", fail);
  // One callback for every write, not a closure per batch (one batch per streamed token).
  const written = (err?: Error | null) => {
    if (err) fail(err);
  };
  return {
    onFailure(listener) {
      listeners.push(listener);
    },
    write(data: string) {
      if (failure !== undefined) throw failure;
      const ok = stream.write(data, written);
      if (ok) return;
      return new Promise<void>((resolve, reject) => {
        const onDrain = () => {
          listeners.splice(listeners.indexOf(onFail), 1);
          resolve();
        };
        const onFail = (err: unknown) => {
          stream.off("drain", onDrain);
          reject(err);
        };
        listeners.push(onFail);
        stream.once("drain", onDrain);
      });
    },
  };
}
