import type { z } from "zod";
import type { RequestId } from "../protocol/messages.ts";
import type { Core } from "../server/core.ts";

/** What a handler may do besides computing its result: no direct IO. */
export interface MethodContext {
  readonly id: RequestId;
  /** Aborted by `cancel`, shutdown, or a signal. */
  readonly signal: AbortSignal;
  /** Queues an event for this request; false when the writer dropped it (queue full). */
  emit(event: string, fields?: Record<string, unknown>): boolean;
  /** Events of this request that the writer dropped so far. */
  readonly droppedEvents: number;
  readonly core: Core;
  /** Cancels another active request (the `cancel` method). */
  cancel(requestId: RequestId | undefined): boolean;
  /** Every method this core serves, for initialize. */
  methodNames(): string[];
  /** Starts the orderly shutdown and resolves once in-flight work has stopped. */
  shutdown(): Promise<void>;
  /**
   * Decides the outcome now: false when the request was already cancelled; otherwise true, and
   * from then on a cancel finds it finished (`{cancelled:false}`). A handler calls it right
   * before it commits something a cancelled request must not leave behind.
   */
  settle?(): boolean;
}

export interface MethodDef<P extends z.ZodType = z.ZodType> {
  name: string;
  params: P;
  /** A plain (non-promise) return value is answered at once, before the next line is read. */
  run(params: z.infer<P>, ctx: MethodContext): unknown | Promise<unknown>;
}

export function defineMethod<P extends z.ZodType>(def: MethodDef<P>): MethodDef<P> {
  return def;
}
