import type { WriteResult } from "./core-process.ts";
import type { LocalAiError } from "./errors.ts";
import type { ClientLogger, ExitInfo } from "./host-types.ts";
import type { RequestStream } from "./request-stream.ts";
import type { GenericEvent } from "./types.ts";

/** The shapes the connection (connection.ts) is built with: its transport, options and calls. */

/** Where new requests go: a running core, the pending table to wait, or nowhere. */
export type Route =
  | { kind: "send"; transport: Transport }
  | { kind: "hold" }
  | { kind: "refuse"; error: (method: string) => LocalAiError };

/** How a call ended. */
export type Outcome = { result: unknown } | { error: LocalAiError };

/** Where requests are written: one running core (a CoreProcess). */
export interface Transport {
  /** Writes one protocol line, unless its input is gone or too much already waits in it. */
  write(line: string): WriteResult;
  /** How the process ended; undefined while it runs. */
  readonly exitInfo: ExitInfo | undefined;
}

export interface ConnectionOptions {
  /** Default time limit of calls that are not cancellable streams; 0 = none. */
  requestTimeoutMs: number;
  /** Default time limit of cancellable streams; undefined = none. */
  streamTimeoutMs: number | undefined;
  /** Events held for a stream nobody reads, before new ones are dropped. */
  maxBufferedEvents: number;
  /** Bytes of those events' lines held for such a stream, before new ones are dropped. */
  maxBufferedBytes: number;
  logger: ClientLogger | undefined;
}

/** How a call behaves, beside its method and params. */
export interface CallShape {
  /**
   * A stream the core can cancel (chat, warmup, stream()): aborting or timing out asks the core
   * to stop it, and its default time limit is the stream one.
   */
  cancellable: boolean;
  /** Only chat events reach the stream; others go to `onOtherEvent`. */
  filterChatEvents?: boolean;
  onOtherEvent?: ((event: GenericEvent) => void) | undefined;
  /**
   * Overrides the default time limit (embed: cancellable, yet timed as a short call; set here
   * rather than as the call's timeoutMs, which checkCallOptions() checks as the host gave it).
   */
  defaultTimeoutMs?: number;
  /** Overrides maxBufferedEvents (0 for calls whose events nobody reads). */
  maxBuffered?: number;
  /**
   * A cancellable short call (embed, sessions.search: pure reads) an abort rejects at once, its
   * cancel still sent: one answered as the cancel crossed it resolved with what the host gave up on.
   * Not for calls with side effects (documents.add, pull, models.load): their result says it happened.
   */
  abortEndsWait?: boolean;
}

/** A call in the connection's table, from its request until it is settled. */
export interface Pending {
  stream: RequestStream<unknown, unknown>;
  method: string;
  /** The request's line until it is written; then "" (an image chat's is tens of MB). */
  line: string;
  /** Its size in bytes once written, as the core counts it (a line_too_long names it). */
  lineBytes?: number;
  cancellable: boolean;
  /** An abort rejects it at once (CallShape.abortEndsWait). */
  abortEndsWait: boolean;
  /** The core the request was written to; undefined while it waits for one. */
  sentTo: Transport | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  /** Set once a cancel of it was sent: leaving its stream's loop, or an abort, sends none again. */
  cancelSent?: boolean;
  /** Set once the core answered a cancel of it: ends it if the core does not (cancelSent). */
  unconfirmedTimer?: ReturnType<typeof setTimeout>;
  /** When that timer fires (ms since the epoch). */
  unconfirmedBy?: number;
  filterChatEvents: boolean;
  onOtherEvent: ((event: GenericEvent) => void) | undefined;
  /** Detaches the AbortSignal listener. */
  cleanup: () => void;
}
