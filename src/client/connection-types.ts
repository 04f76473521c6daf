import type { WriteResult } from "./core-process.ts";
import type { ClientLogger, ExitInfo } from "./host-types.ts";
import type { GenericEvent } from "./types.ts";

/** The shapes the connection (connection.ts) is built with: its transport, options and calls. */

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
}
