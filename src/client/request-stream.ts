import type { LocalAiError } from "./errors.ts";
import type { RequestId } from "./protocol-types.ts";

/**
 * One in-flight request seen from the host: an async iterator over its events and a promise
 * of its result. Events are buffered until the host reads them (up to `maxBuffered` events and
 * `maxBufferedBytes` of their lines; past either new ones are dropped and counted, as the core's
 * own writer does), so a host that only awaits `result` never grows memory without bound.
 */
export class RequestStream<E, R> implements AsyncIterable<E> {
  readonly id: RequestId;
  readonly method: string;
  /** Settles with the terminal message: the result, or a LocalAiError. */
  readonly result: Promise<R>;
  /** Events dropped on the client's side because nobody read them in time. */
  droppedEvents = 0;

  private readonly buffer: { event: E; bytes: number }[] = [];
  /** The bytes of the lines the buffered events came in: their weight in memory, about. */
  private bufferedBytes = 0;
  /**
   * Reads waiting for an event, oldest first: a host may call next() again before the last one
   * settled, or run two loops over one stream; each read gets the next event or the end.
   */
  private readonly waiters: { resolve: (step: IteratorResult<E>) => void; reject: (err: unknown) => void }[] =
    [];
  private ended: { error?: LocalAiError } | undefined;
  private detached = false;
  private resolveResult!: (value: R) => void;
  private rejectResult!: (err: LocalAiError) => void;

  constructor(
    id: RequestId,
    method: string,
    private readonly maxBuffered: number,
    private readonly onCancel: () => Promise<boolean>,
    /**
     * The count alone let 10 000 events of megabytes each (a tool's output, an image) hold
     * gigabytes of the host's memory for a stream nobody read.
     */
    private readonly maxBufferedBytes = Number.POSITIVE_INFINITY,
    /** Its reader left a loop over it early, before it ended: the connection cancels it. */
    private readonly onLeave: () => void = () => {},
  ) {
    this.id = id;
    this.method = method;
    this.result = new Promise<R>((resolve, reject) => {
      this.resolveResult = resolve;
      this.rejectResult = reject;
    });
    // A host that only iterates sees the error there; the result's rejection must not also be
    // reported as unhandled. Awaiting `result` still rejects.
    this.result.catch(() => {});
  }

  /** True once the terminal message (or a client-side failure) has arrived. */
  get done(): boolean {
    return this.ended !== undefined;
  }

  /**
   * Asks the core to cancel this request; resolves with whether the core caught it in flight.
   * Never rejects: a host calls it as it aborts a fetch, without awaiting it, and a cancel the
   * core never answers (or a core that exits meanwhile) would otherwise be an unhandled rejection,
   * which ends a Node host. Such a cancel resolves false; the request itself still ends (its
   * `cancelled` says the core did not confirm). `client.cancel(id)` is a call, and rejects.
   */
  cancel(): Promise<boolean> {
    if (this.ended) return Promise.resolve(false);
    return this.onCancel().catch(() => false);
  }

  /** @internal Called by the client for each event of this request, with its line's size. */
  pushEvent(event: E, bytes = 0): void {
    if (this.ended || this.detached) return;
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter.resolve({ value: event, done: false });
      return;
    }
    // One event is kept whatever its size (a line over maxBufferedBytes, which maxLineBytes may
    // allow): dropped, a reader between two reads lost it though nothing else was held.
    const heavy = this.buffer.length > 0 && this.bufferedBytes + bytes > this.maxBufferedBytes;
    if (this.buffer.length >= this.maxBuffered || heavy) {
      this.droppedEvents++;
      return;
    }
    this.buffer.push({ event, bytes });
    this.bufferedBytes += bytes;
  }

  /** @internal Called by the client with the terminal message. */
  settle(outcome: { result: R } | { error: LocalAiError }): void {
    if (this.ended) return;
    if ("error" in outcome) {
      this.ended = { error: outcome.error };
      this.rejectResult(outcome.error);
    } else {
      this.ended = {};
      this.resolveResult(outcome.result);
    }
    // Reads wait only on an empty buffer: each of them ends now.
    for (const waiter of this.waiters.splice(0)) {
      if (this.ended.error) waiter.reject(this.ended.error);
      else waiter.resolve({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<E> {
    return {
      next: () => this.next(),
      // Leaving a for-await early (break, return, a throw) is being done with the request: it is
      // cancelled, unless it already ended (no stray cancel), and events stop being buffered.
      return: async () => {
        if (!this.ended && !this.detached) this.onLeave();
        this.detached = true;
        this.buffer.length = 0;
        this.bufferedBytes = 0;
        // Other reads of the stream (a second loop) end with it, not when the request settles.
        for (const waiter of this.waiters.splice(0)) waiter.resolve({ value: undefined, done: true });
        return { value: undefined, done: true };
      },
    };
  }

  private next(): Promise<IteratorResult<E>> {
    const held = this.buffer.shift();
    if (held !== undefined) {
      this.bufferedBytes -= held.bytes;
      return Promise.resolve({ value: held.event, done: false });
    }
    if (this.ended) {
      return this.ended.error
        ? Promise.reject(this.ended.error)
        : Promise.resolve({ value: undefined, done: true });
    }
    if (this.detached) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
}

/** `stream`, failed with `error` before it was sent. */
export function settled<E, R>(stream: RequestStream<E, R>, error: LocalAiError): RequestStream<E, R> {
  stream.settle({ error });
  return stream;
}
