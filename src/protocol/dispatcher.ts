import { logger, logUnexpected } from "../util/logger.ts";
import { cutText } from "../util/text-cut.ts";
import { ActiveTable, ambiguousCancel, implicitCandidates, shownId } from "./active-table.ts";
import { crowdedLine } from "./crowded-line.ts";
import { CoreError, type ErrorCode, isCoreError } from "./errors.ts";
import { type ExactNumberId, exactIds, needsExactIds } from "./exact-id.ts";
import type { ErrorMessage, RequestId, ResultMessage } from "./messages.ts";
import {
  type ActiveRequest,
  AFTER_EARLIER_LOADS,
  GRACED_BY_STOP,
  JOINED_BY_SHUTDOWN,
  LISTED_REQUESTS,
  MAX_IN_FLIGHT,
  type MethodEntry,
  type MethodHandler,
  type MethodTable,
  type OutputPort,
  type RequestContext,
  STOP_GRACE_MS,
  UNBOUNDED_METHODS,
} from "./method-table.ts";
import { checkedParams } from "./params-check.ts";

/** How a request that started at once stands: already answered, or still working. */
type Started =
  | { kind: "message"; message: ResultMessage | ErrorMessage }
  | { kind: "pending"; result: Promise<unknown> };

/** A never-aborted signal shared by requests that cannot be cancelled (ping, doctor…). */
const NEVER = new AbortController().signal;

/**
 * One in-flight request. It is also the handler's RequestContext, so a request costs one
 * object (plus an AbortController only when it can be cancelled).
 */
class InFlight implements RequestContext {
  readonly controller: AbortController | undefined;
  /** Resolves once its terminal is handed to the writer (`answered`), read by the host or not. */
  decided: Promise<void> = Promise.resolve();
  /** Its outcome is decided; a cancel arriving now finds it finished. */
  settled = false;
  /**
   * Its terminal message is made and handed to the writer: no longer in flight for `status`,
   * though it keeps its table entry (its id stays taken) until the writer has taken the line.
   */
  answered = false;
  droppedEvents = 0;
  /** When it arrived, for `status`. */
  readonly since = Date.now();

  constructor(
    readonly id: RequestId,
    readonly method: MethodEntry,
    private readonly owner: Dispatcher,
    /** A cancel's `request_id` as written, when it is a number a double cannot hold. */
    private readonly exactTarget?: ExactNumberId,
  ) {
    this.controller = method.cancellable ? new AbortController() : undefined;
  }

  get signal(): AbortSignal {
    return this.controller?.signal ?? NEVER;
  }
  get stopping(): AbortSignal {
    return this.owner.stopping.signal;
  }

  emit(event: string, fields: object): boolean {
    const ok = this.owner.out.eventOf(this.id, event, fields);
    if (!ok) this.droppedEvents++;
    return ok;
  }

  cancel(requestId: RequestId | undefined): boolean {
    return this.owner.cancel(
      typeof requestId === "number" && this.exactTarget ? this.exactTarget : requestId,
    );
  }

  methodNames(): string[] {
    return [...this.owner.methods.keys()];
  }

  activeRequests(): ActiveRequest[] {
    return this.owner.activeRequests(this);
  }

  shutdown(): Promise<void> {
    return this.owner.onShutdownRequest();
  }

  settle(): boolean {
    if (this.signal.aborted) return false;
    this.settled = true;
    return true;
  }

  /** Aborts it if it is cancellable and still undecided; true when this call aborted it. */
  abort(reason: CoreError): boolean {
    if (!this.controller || this.settled || this.controller.signal.aborted) return false;
    this.controller.abort(reason);
    return true;
  }
}

/**
 * Owns in-flight work: parses each line into a request, runs its handler concurrently, and
 * guarantees one terminal message per usable id. Cancellable requests (chats) get their own
 * AbortController; `cancel` and shutdown abort them. */
export class Dispatcher {
  private readonly active = new ActiveTable<InFlight>();
  private shuttingDown = false;
  readonly stopping = new AbortController(); // Aborted as the stop ends its grace: RequestContext.stopping.
  /** One load per method, shared by every request that arrives while it is loading. */
  private readonly loading = new Map<string, Promise<MethodHandler>>();
  private readonly loaded = new Map<string, MethodHandler>();
  private readonly emptyParams = new Map<string, { value: unknown }>();

  constructor(
    readonly methods: MethodTable,
    readonly out: OutputPort,
    readonly onShutdownRequest: () => Promise<void>,
  ) {}

  /**
   * What is in flight, oldest first, as read-only copies: requests already answered (their
   * line waiting in the writer) are not. `asking` is listed too when it is answered at once and
   * so never entered the table (a loaded plain-value method). At most the `limit` + 1 oldest
   * besides `asking` (its caller leaves itself out).
   */
  activeRequests(asking?: InFlight, limit = LISTED_REQUESTS): ActiveRequest[] {
    const all = this.active.oldest(
      limit + 1,
      (r) => !r.answered,
      (r) => r.since,
    );
    if (asking && !all.includes(asking)) all.push(asking);
    return all
      .map((r) => ({ id: r.id, method: r.method.name, since: r.since }))
      .sort((a, b) => a.since - b.since);
  }

  /** One whole request line, as the transport read it. */
  handleLine(text: string): void {
    const crowded = crowdedLine(text);
    if (crowded) {
      this.fail(crowded.id, "invalid_request", crowded.message);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      // The parser quotes the token it stopped at, half an emoji when it was one: made text.
      this.fail(null, "invalid_json", `not valid JSON: ${(err as Error).message.toWellFormed()}`);
      return;
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      this.fail(null, "invalid_request", "a request must be a JSON object with id and method");
      return;
    }
    const req = value as Record<string, unknown>;
    // The same rule as RequestIdSchema, inline: this is the hot path of every request.
    let id = req.id as RequestId;
    if (typeof id !== "string" && (typeof id !== "number" || !Number.isFinite(id))) {
      const why = id === undefined ? "missing field 'id'" : "field 'id' must be a string or a finite number";
      this.fail(null, "invalid_request", why);
      return;
    }
    if (typeof req.method !== "string" || req.method.length === 0) {
      this.fail(id, "invalid_request", "field 'method' must be a non-empty string");
      return;
    }
    const params = req.params ?? {};
    if (typeof params !== "object" || params === null || Array.isArray(params)) {
      this.fail(id, "invalid_request", "field 'params' must be an object");
      return;
    }
    // A number that may have lost digits or is spelled otherwise is read again (rare: not the hot path).
    const target = req.method === "cancel" ? (params as { request_id?: unknown }).request_id : undefined;
    let exactTarget: ExactNumberId | undefined;
    if (needsExactIds(text, id, target)) {
      const exact = exactIds(text, req);
      id = exact.id ?? id;
      if (typeof exact.requestId === "object") exactTarget = exact.requestId;
    }
    if (this.active.get(id)) {
      this.fail(id, "invalid_request", `id ${shownId(id)} is already in use by an active request`);
      return;
    }
    const method = this.methods.get(req.method);
    if (!method) {
      this.fail(id, "unknown_method", `unknown method '${shownName(req.method)}'`);
      return;
    }
    if (this.shuttingDown && method.name !== "shutdown") {
      this.fail(id, "cancelled", "the core is shutting down");
      return;
    }
    if (this.active.size >= MAX_IN_FLIGHT && !UNBOUNDED_METHODS.has(method.name)) {
      const message = `the core has ${MAX_IN_FLIGHT} requests in flight; try again when some have ended`;
      this.fail(id, "too_many_requests", message, { limit: MAX_IN_FLIGHT });
      return;
    }
    // Intake closes with the shutdown request itself, not when its handler first runs (after
    // its module loads): the rest of the same read is answered `cancelled` like later reads.
    if (method.name === "shutdown") this.shuttingDown = true;
    this.start(id, method, params, exactTarget);
  }

  /**
   * Cancels a cancellable request. Without an id, only when exactly one is a candidate
   * (`implicitCandidates`). Throws invalid_request when ambiguous.
   */
  cancel(requestId: RequestId | undefined): boolean {
    const reason = new CoreError("cancelled", "cancelled by the host");
    if (requestId === undefined) {
      const candidates = implicitCandidates(this.active.all());
      if (candidates.length > 1) throw ambiguousCancel(candidates);
      return candidates[0]?.abort(reason) ?? false;
    }
    return this.active.get(requestId)?.abort(reason) ?? false;
  }

  /**
   * Cancels every chat-like request but GRACED_BY_STOP's, waits until each has answered, then (or after
   * `graceMs`, 0: at once) aborts `stopping`; not shutdowns (two in one read must not wait on each other) nor
   * JOINED_BY_SHUTDOWN's: an unload by name read with the shutdown, aborted, ended `cancelled`; one still
   * undecided keeps the grace, a live drive's stat answering in it. The drain does the rest
   * (docs/protocol.md "Drain on exit").
   */
  async stopAll(graceMs = STOP_GRACE_MS): Promise<void> {
    this.shuttingDown = true;
    const reason = new CoreError("cancelled", "the core is shutting down");
    const end = () => this.stopping.abort(reason);
    const late = graceMs > 0 ? setTimeout(end, graceMs) : void end();
    const waiting: Promise<void>[] = [];
    for (const a of this.active.all()) {
      if (a.method.name === "shutdown" || JOINED_BY_SHUTDOWN.has(a.method.name)) continue;
      if (!GRACED_BY_STOP.has(a.method.name)) a.abort(reason);
      waiting.push(a.decided);
    }
    await Promise.all(waiting);
    if (this.active.all().some((a) => JOINED_BY_SHUTDOWN.has(a.method.name) && !a.settled)) return;
    clearTimeout(late);
    end();
  }

  /** Resolves once every request has answered (its terminal handed to the writer). */
  async settled(): Promise<void> {
    for (;;) {
      const open = this.active.all().filter((a) => !a.answered);
      if (open.length === 0) return;
      await Promise.all(open.map((a) => a.decided));
    }
  }

  private start(id: RequestId, method: MethodEntry, params: object, exactTarget?: ExactNumberId): void {
    const request = new InFlight(id, method, this, exactTarget);
    const def = method.cancellable || this.waitsForLoads(method) ? undefined : this.loaded.get(method.name);
    let started: Started | undefined;
    if (def) {
      // A loaded, non-cancellable method runs right away; one that answers with a plain value
      // (ping, cancel, initialize) is answered before the next line is read, with no promise
      // and no table entry: nothing can observe it in flight.
      started = this.startNow(request, def, params);
      try {
        if (started.kind === "message" && this.out.tryTerminal(started.message)) return;
      } catch {
        // Unserializable: run() below answers internal_error for it.
      }
    }
    // Registered before the method's module loads, so duplicates and cancels see it at once.
    this.active.set(id, request);
    request.decided = this.run(request, params, started);
  }

  private startNow(request: InFlight, def: MethodHandler, params: object): Started {
    try {
      const out = def.run(this.parseParams(def, params), request);
      if (out instanceof Promise) return { kind: "pending", result: out };
      request.settled = true;
      return { kind: "message", message: { id: request.id, type: "result", result: out ?? {} } };
    } catch (err) {
      request.settled = true;
      return { kind: "message", message: toErrorMessage(request.id, err, request.signal, def.name) };
    }
  }

  private async run(request: InFlight, params: object, started?: Started): Promise<void> {
    const { method, signal } = request;
    let message: ResultMessage | ErrorMessage;
    if (started?.kind === "message") {
      message = started.message;
    } else {
      try {
        let result: unknown;
        if (started) result = await started.result;
        else {
          if (this.waitsForLoads(method)) await Promise.allSettled(this.pendingLoads());
          const def = this.loaded.get(method.name) ?? (await this.definition(method));
          const out = def.run(this.parseParams(def, params), request);
          // A plain value is queued in the turn it was made in, so what it read stays true when
          // its line goes out: status lists only requests answered after it.
          result = out instanceof Promise ? await out : out;
        }
        // A cancel that was acknowledged must end the request as cancelled, even if it raced the finish.
        if (signal.aborted) throw signal.reason;
        message = { id: request.id, type: "result", result: result ?? {} };
      } catch (err) {
        // An acknowledged cancel wins over a failure too (bad params, no config): it says cancelled.
        const cancelled = signal.aborted && !(isCoreError(err) && err.code === "cancelled");
        message = toErrorMessage(request.id, cancelled ? signal.reason : err, signal, method.name);
      }
    }
    request.settled = true;
    request.answered = true;
    // The id stays taken until the writer has the line.
    void this.handOver(request, message).then(() => this.active.delete(request.id));
  }

  /** Queues a request's terminal message; resolves once the writer has taken its line. */
  private async handOver(request: InFlight, message: ResultMessage | ErrorMessage): Promise<void> {
    try {
      await this.out.terminal(message);
    } catch (err) {
      // The result could not be serialized (e.g. a BigInt); the id still gets its one answer.
      logUnexpected(`method ${request.method.name} produced an unserializable result`, err);
      const error = new Error("unserializable");
      await this.out.terminal(toErrorMessage(request.id, error, request.signal, request.method.name));
    }
  }

  /**
   * Validates params. Most requests of a kind carry no params at all (ping, doctor), so the
   * parse of `{}` is done once per method and its frozen result shared.
   */
  private parseParams(def: MethodHandler, params: object): unknown {
    const empty = Object.keys(params).length === 0;
    if (empty) {
      const cached = this.emptyParams.get(def.name);
      if (cached) return cached.value;
    }
    const data = checkedParams(def.params, params);
    if (empty) this.emptyParams.set(def.name, { value: Object.freeze(data) });
    return data;
  }

  private definition(method: MethodEntry): Promise<MethodHandler> {
    let def = this.loading.get(method.name);
    if (!def) {
      def = method.load().then((d) => {
        this.loaded.set(method.name, d);
        return d;
      });
      this.loading.set(method.name, def);
      // A failed load is retried by the next request rather than cached.
      def.catch(() => this.loading.delete(method.name));
    }
    return def;
  }

  /** An erase read while earlier requests wait for their method's load: it runs after them. */
  private waitsForLoads(method: MethodEntry): boolean {
    return AFTER_EARLIER_LOADS.has(method.name) && this.pendingLoads().length > 0;
  }

  /** Method loads not yet done, which requests read earlier wait for (AFTER_EARLIER_LOADS). */
  private pendingLoads(): Promise<MethodHandler>[] {
    return [...this.loading].filter(([name]) => !this.loaded.has(name)).map(([, def]) => def);
  }

  private fail(id: RequestId | null, code: ErrorCode, message: string, data?: Record<string, unknown>): void {
    void this.out.terminal({ id, type: "error", code, message, ...(data ? { data } : {}) });
  }
}

/**
 * A host's method name as an error quotes it: cut, and escaped as in JSON (a lone surrogate,
 * a newline, a quote), so the message stays one line of text (docs/protocol.md "Errors").
 */
const shownName = (name: string) => JSON.stringify(cutText(name, SHOWN_NAME_CHARS)).slice(1, -1);
const SHOWN_NAME_CHARS = 80;

function toErrorMessage(id: RequestId, err: unknown, signal: AbortSignal, method: string): ErrorMessage {
  if (isCoreError(err)) {
    const { code, message, data } = err;
    return { id, type: "error" as const, code, message, ...(data ? { data } : {}) };
  }
  if (signal.aborted) {
    const reason = signal.reason;
    const message = isCoreError(reason) ? reason.message : "the request was cancelled";
    return { id, type: "error" as const, code: "cancelled" as const, message };
  }
  logUnexpected(`method ${method} failed`, err);
  logger.debug("the stack trace above stays on stderr; the host gets internal_error");
  const message = `internal error in ${method}; see the core's log for details`;
  return { id, type: "error", code: "internal_error", message };
}
