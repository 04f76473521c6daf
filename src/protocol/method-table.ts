import type { z } from "zod";
import type { ErrorMessage, EventMessage, RequestId, ResultMessage } from "./messages.ts";

/**
 * What the dispatcher needs to know of methods, and what a method gets from it. The methods
 * themselves (src/methods/) and their services live above this floor; the dispatcher sees
 * only this table and the output port.
 */

/** Event name → the fields an event of that name carries beside id, type and event. */
export type EventFields = Record<string, object>;

/** A request in flight, as `status` reports it: a read-only copy, nothing to act on. */
export interface ActiveRequest {
  readonly id: RequestId;
  readonly method: string;
  /** Clock time (ms since the epoch) it arrived. */
  readonly since: number;
}

/** What a handler may do besides computing its result: no direct IO. */
export interface RequestContext<E extends EventFields = EventFields> {
  readonly id: RequestId;
  /** Aborted by `cancel`, shutdown, or a signal. */
  readonly signal: AbortSignal;
  /**
   * Aborted as the core stops (shutdown, EOF, a signal), for every request, once the stop's grace
   * (STOP_GRACE_MS) is over or every request it waits for has answered with no unload undecided:
   * what a long method `cancel` cannot reach (models, plan, doctor, sessions.export) heeds, so the
   * stop is not held for it, and a `models.unload` still asking its path's drive.
   */
  readonly stopping: AbortSignal;
  /**
   * Queues an event for this request; false when the writer dropped it (queue full). Typed per
   * event: an event the method does not declare, or a field its event lacks, does not compile.
   */
  emit<K extends keyof E & string>(event: K, fields: E[K]): boolean;
  /** Events of this request that the writer dropped so far. */
  readonly droppedEvents: number;
  /** Cancels another active request (the `cancel` method). */
  cancel(requestId: RequestId | undefined): boolean;
  /** Every method this core serves, for initialize. */
  methodNames(): string[];
  /** The requests in flight now, this one included (for `status`). */
  activeRequests(): ActiveRequest[];
  /** Starts the orderly shutdown and resolves once in-flight work has stopped. */
  shutdown(): Promise<void>;
  /**
   * Decides the outcome now: false when the request was already cancelled; otherwise true, and
   * from then on a cancel finds it finished (`{cancelled:false}`). A handler calls it right
   * before it commits something a cancelled request must not leave behind.
   */
  settle(): boolean;
}

/** A loaded method as the dispatcher runs it: params validated by `params`, then `run`. */
export interface MethodHandler {
  readonly name: string;
  readonly params: z.ZodType;
  /** A plain (non-promise) return value is answered at once, before the next line is read. */
  run(params: unknown, ctx: RequestContext): unknown;
}

/** A method known before its module loads: a ping never pays for the planner or the agent. */
export interface MethodEntry {
  readonly name: string;
  /** Long-running work that `cancel` may target (chat, warm-up); known before the module loads. */
  readonly cancellable: boolean;
  load(): Promise<MethodHandler>;
}

/** Every method served, by name. */
export type MethodTable = ReadonlyMap<string, MethodEntry>;

/** Where the dispatcher's messages go: the Writer, or a test's recorder. */
export interface OutputPort {
  /** Queues an event; false when it was dropped (queue full). */
  event(msg: EventMessage): boolean;
  /** The same for `{...fields, id, type: "event", event}`, made without that object. */
  eventOf(id: RequestId, event: string, fields: object): boolean;
  /** Queues a terminal when there is room now; false (nothing queued) when it must wait. */
  tryTerminal(msg: ResultMessage | ErrorMessage): boolean;
  /** Queues a terminal, waiting for room; throws when the message cannot be serialized. */
  terminal(msg: ResultMessage | ErrorMessage): Promise<void>;
}

/**
 * The requests the core holds in flight at most; past it a new one is refused at once with
 * `too_many_requests` (docs/protocol.md#errors), except the ones that answer at once and must
 * always be answered (UNBOUNDED_METHODS). 40,000 chats in one write held ~345 MB and delayed a
 * ping 2 s; at this bound they hold ~30 MB.
 */
export const MAX_IN_FLIGHT = 4096;
/** Answered at once and never refused for load: the host's controls. */
export const UNBOUNDED_METHODS: ReadonlySet<string> = new Set([
  "initialize",
  "ping",
  "cancel",
  "status",
  "shutdown",
]);

/**
 * How long a stop lets work `cancel` cannot reach (models, plan, doctor, an export) go on before
 * `stopping` ends it: a script's `models` or export piped with its EOF ends as it would have, a
 * hung probe or a listing of thousands of files is stopped inside the host's wait, whose margin
 * (client/shutdown-timing.ts CORE_STOP_MARGIN_MS) counts these 2 s before the MCP servers' stop.
 */
export const STOP_GRACE_MS = 2_000;

/**
 * Requests whose work the services' own stop joins, neither cancelled nor waited for by the stop
 * (an unload's wait on a path's drive heeds `stopping`): shutdown begins that stop without waiting
 * for them first (a `models.unload` is the scheduler's unload, which its stop awaits anyway;
 * waited for first, its save and stop grace came before every other model's, past the client's
 * wait: client/shutdown-timing.ts). They are still answered before the core exits.
 */
export const JOINED_BY_SHUTDOWN: ReadonlySet<string> = new Set(["models.unload"]);

/**
 * Cancellable requests a stop does not cancel at once: as those `cancel` cannot reach, they have
 * the stop's grace (STOP_GRACE_MS) to answer, so a script's search piped with its EOF is answered.
 */
export const GRACED_BY_STOP: ReadonlySet<string> = new Set(["sessions.search"]);

/**
 * Erases that run only once the methods earlier requests are loading have loaded: a chat or a
 * `documents.add` watches for erases from its run's start (store/erasures.ts), which waits for its
 * module, so an erase read after it but run first left it to write the session back.
 */
export const AFTER_EARLIER_LOADS: ReadonlySet<string> = new Set(["sessions.delete", "users.delete"]);

/** The requests in flight `status` lists at most: the oldest (docs/protocol.md#status). */
export const LISTED_REQUESTS = 256;
