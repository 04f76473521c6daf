import { MAX_TIMER_MS } from "../util/timer-limit.ts";
import { AbortWatch } from "./abort-watch.ts";
import {
  cancelOptions,
  checkCallOptions,
  type GivenOptions,
  readCallOptions,
  unreadable,
} from "./call-options.ts";
import { isChatEventName } from "./chat-events.ts";
import { boundedWaitMs, numberOr } from "./client-options.ts";
import type { CallShape, ConnectionOptions, Outcome, Pending, Route, Transport } from "./connection-types.ts";
import {
  callError,
  coreBacklogError,
  coreExitedError,
  errorOfMessage,
  LocalAiError,
  notConnectedError,
  oversizeAnswerError,
  ownCopy,
  timeoutError,
} from "./errors.ts";
import { guarded, guardedLogger } from "./host-callbacks.ts";
import type { AbortSignalLike, CallOptions, ClientLogger } from "./host-types.ts";
import type { RequestId } from "./protocol-types.ts";
import { RequestStream, settled } from "./request-stream.ts";
import type { CancelResult, GenericEvent } from "./types.ts";
import { asText, clip, isObject, lineKey, readLine, requestLine, sentAsLineOf, sole } from "./wire-lines.ts";

/**
 * The request/answer half of the client, as the MCP SDK's `Protocol` is to its `Client`: it
 * numbers requests, keeps the table of those pending, writes each as one line, routes the
 * core's lines (events to their stream; a result or an error settles it), and ends every call
 * it holds: by its answer, its time limit, its AbortSignal, or a failure handed down by the
 * lifecycle above. It knows nothing of processes starting or restarting; the client only says
 * where new requests go: to a running core (`attach`), into the table to wait (`hold`), or
 * nowhere (`refuse`).
 */

const NOT_ENDED = "the core answered its cancel but did not end it";

export class Connection {
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();
  private route: Route = { kind: "refuse", error: (method) => notConnectedError(method) };
  private malformed = 0;
  private readonly aborts = new AbortWatch((id) => this.abort(id));
  /** The host's logger, which never throws (host-callbacks.ts). */
  private readonly logger: ClientLogger;

  constructor(private readonly options: ConnectionOptions) {
    this.logger = guardedLogger(options.logger);
  }

  /** Lines from the core that were not protocol messages, ignored. */
  get malformedLines(): number {
    return this.malformed;
  }

  // ---- where requests go -------------------------------------------------------------------

  /** New requests are written to this core; those that waited are written now, in order. */
  attach(transport: Transport): void {
    this.route = { kind: "send", transport };
    for (const [id, entry] of this.pending)
      if (entry.sentTo === undefined) this.writeTo(transport, id, entry);
  }

  /** New requests wait in the table (the core is starting) until attach() or failAll(). */
  hold(): void {
    this.route = { kind: "hold" };
  }

  /** New requests fail at once with this error. Pending ones are left as they are. */
  refuse(error: (method: string) => LocalAiError): void {
    this.route = { kind: "refuse", error };
  }

  // ---- calls -------------------------------------------------------------------------------

  /** Starts a call through the current route and returns its stream. */
  open<E, R>(method: string, params: unknown, options: GivenOptions, shape: CallShape): RequestStream<E, R> {
    const id = String(this.nextId++);
    const maxBuffered = shape.maxBuffered ?? this.options.maxBufferedEvents;
    const bytes = this.options.maxBufferedBytes;
    const cancel = () => this.cancelFor(id);
    const stream = new RequestStream<E, R>(id, method, maxBuffered, cancel, bytes, () => this.leave(id));
    if (this.route.kind === "refuse") return settled(stream, this.route.error(method));
    // Options that refuse the call (an aborted signal, a deadline past) leave it unsent.
    const checked = checkCallOptions(options, method);
    if (checked instanceof LocalAiError) return settled(stream, checked);
    const line = requestLine(id, method, params);
    if (typeof line !== "string") return settled(stream, line);
    const byDefault =
      shape.defaultTimeoutMs ??
      (shape.cancellable ? this.options.streamTimeoutMs : this.options.requestTimeoutMs);
    const entry = this.track(id, stream, method, line, checked.timeoutMs ?? byDefault, shape);
    // A signal whose addEventListener throws fails the call, not the caller: out of the table.
    if (!this.watchSignal(id, entry, checked.signal)) return stream;
    if (this.route.kind === "send") this.writeTo(this.route.transport, id, entry);
    return stream;
  }

  /** Sends to this core now, whatever the route (initialize before it is ready, shutdown after). */
  sendNow<R>(transport: Transport, method: string, params: unknown, timeoutMs: number): Promise<R> {
    const id = String(this.nextId++);
    const stream = new RequestStream<never, R>(id, method, 0, async () => false);
    const line = requestLine(id, method, params);
    if (typeof line !== "string") return Promise.reject(line);
    const entry = this.track(id, stream, method, line, timeoutMs, { cancellable: false });
    this.writeTo(transport, id, entry);
    return stream.result;
  }

  /** LocalAiClient.cancel(): a call of ours (without an id, the sole()) is cancelled as its cancel() does. */
  cancel(requestId: RequestId | undefined, options: CallOptions = {}): Promise<boolean> {
    // Ours are strings; the core tells 5 from "5", so one of ours given as a number is ours still.
    const ours = requestId === undefined ? sole(this.pending) : String(requestId);
    if (ours !== undefined && this.pending.has(ours)) return this.cancelFor(ours, options);
    return this.cancelRemote(requestId, options);
  }

  /** Asks the core to cancel `id`: whether it caught it in flight; never unbounded (`cancelOptions`). */
  async cancelRemote(requestId: RequestId | undefined, given?: GivenOptions): Promise<boolean> {
    const params = requestId === undefined ? {} : { request_id: requestId };
    const options = cancelOptions(given, boundedWaitMs(this.options.requestTimeoutMs));
    // Its wait over before it began (a deadline past, an aborted signal), a cancel is still sent:
    // it is what stops the core's work, which went on for no one; the caller hears the refusal.
    const refused = checkCallOptions(options, "cancel");
    if (refused instanceof LocalAiError && refused.code !== "invalid_request") {
      this.cancelRemote(requestId).catch(() => {});
      throw refused;
    }
    const call = this.open<never, CancelResult>("cancel", params, options, {
      cancellable: false,
      maxBuffered: 0,
    });
    const result: unknown = await call.result;
    const cancelled = isObject(result) ? result.cancelled : undefined;
    if (typeof cancelled === "boolean") return cancelled;
    // A hostile core's `null` made `.cancelled` a TypeError: no code, no method for the host.
    throw this.brokenMessage("cancel", `cancel result without a boolean cancelled: ${clip(asText(result))}`);
  }

  /** Ends the pending calls `which` selects (all by default) with `error`, each under its own method. */
  failAll(error: LocalAiError, which: (sentTo: Transport | undefined) => boolean = () => true): void {
    for (const [id, entry] of [...this.pending]) {
      if (!which(entry.sentTo)) continue;
      this.settle(id, {
        error: new LocalAiError(error.code, error.message, ownCopy(error.data), entry.method),
      });
    }
  }

  private track<E, R>(
    id: string,
    stream: RequestStream<E, R>,
    method: string,
    line: string,
    timeoutMs: number | undefined,
    shape: CallShape,
  ): Pending {
    const entry: Pending = {
      // The table holds calls of every type; each is settled with what its own method answers.
      stream: stream as unknown as RequestStream<unknown, unknown>,
      method,
      line,
      cancellable: shape.cancellable,
      abortEndsWait: shape.abortEndsWait ?? false,
      sentTo: undefined,
      timer: undefined,
      filterChatEvents: shape.filterChatEvents ?? false,
      // A host's callback that throws must not break the routing of the core's lines.
      onOtherEvent: guarded(this.logger, "onOtherEvent", shape.onOtherEvent),
      cleanup: () => {},
    };
    this.pending.set(id, entry);
    if (timeoutMs && timeoutMs > 0) {
      // Node fires a timer of 2^31 ms or more at once; such a limit is as good as none.
      if (timeoutMs <= MAX_TIMER_MS) entry.timer = setTimeout(() => this.timeOut(id, timeoutMs), timeoutMs);
    }
    return entry;
  }

  private watchSignal(id: string, entry: Pending, signal: AbortSignalLike | undefined): boolean {
    try {
      if (signal) entry.cleanup = this.aborts.watch(id, signal);
    } catch (err) {
      this.settle(id, { error: unreadable(entry.method, err, "signal refused a listener") });
    }
    return this.pending.has(id);
  }

  /** A failed write (the process gone or going) fails the call with its exit's error, now or at failAll. */
  private writeTo(transport: Transport, id: string, entry: Pending): void {
    entry.sentTo = transport;
    const written = transport.write(entry.line);
    if (written.kind === "written") {
      // Never written again (a call the core did not answer fails with its exit): only its size is kept.
      entry.lineBytes = Buffer.byteLength(entry.line, "utf8");
      entry.line = "";
      return;
    }
    const info = transport.exitInfo;
    if (written.kind === "backlog")
      this.settle(id, { error: coreBacklogError(written.queuedBytes, entry.method) });
    else if (info) this.settle(id, { error: coreExitedError(info) });
  }

  private async cancelFor(id: string, given: CallOptions = {}): Promise<boolean> {
    // A cancel its options make invalid does nothing: its refusal, taken for a cancel the core did
    // not confirm, ended the call here, unsent, while the core went on with it.
    const options = readCallOptions(given, "cancel");
    const checked = checkCallOptions(options, "cancel");
    if (checked instanceof LocalAiError && checked.code === "invalid_request") throw checked;
    const entry = this.pending.get(id);
    if (!entry) return false;
    if (entry.sentTo === undefined) {
      // Never reached the core: cancel it here.
      this.settle(id, { error: callError("cancelled", "the request was cancelled", entry.method) });
      return true;
    }
    return this.cancelSent(id, entry, "cancelled", options as CallOptions);
  }

  /**
   * The core answers the call with `cancelled` once it has stopped it. A cancel it does not
   * answer either (a core that reads but is stuck), or answers but does not carry out within the
   * cancel's own time limit (its timeoutMs, else requestTimeoutMs, else 60 s: boundedWaitMs), must
   * still end the wait: chats have no time limit by default. Its failure is the caller's to see.
   */
  private cancelSent(id: string, entry: Pending, how: string, options: CallOptions = {}): Promise<boolean> {
    const giveUp = (why: string) =>
      this.pending.get(id) === entry &&
      this.settle(id, { error: callError("cancelled", `the request was ${how}; ${why}`, entry.method) });
    entry.cancelSent = true;
    const ms = numberOr(options?.timeoutMs, boundedWaitMs(this.options.requestTimeoutMs));
    const asked = this.cancelRemote(id, { ...options, timeoutMs: ms });
    asked.then(
      () => {
        if (!(ms > 0 && ms <= MAX_TIMER_MS) || this.pending.get(id) !== entry) return;
        // Beside its own time limit, which may come sooner; cleared as that is. The earliest end
        // any confirmed cancel asked for: a host cancelling again every minute would otherwise
        // never see it end, and one asking again for a shorter wait would not get it.
        const by = Date.now() + ms;
        if (entry.unconfirmedTimer && (entry.unconfirmedBy ?? 0) <= by) return;
        clearTimeout(entry.unconfirmedTimer);
        entry.unconfirmedBy = by;
        entry.unconfirmedTimer = setTimeout(giveUp, ms, `${NOT_ENDED} within ${ms} ms`);
      },
      (err) => {
        this.log("warn", `cancel of ${id} failed: ${(err as Error).message}`);
        giveUp(`the core did not confirm its cancel: ${(err as Error).message}`);
      },
    );
    return asked;
  }

  /** A loop over its stream was left early: a cancellable call is cancelled (unsent, ended here), once. */
  private leave(id: string): void {
    const entry = this.pending.get(id);
    if (entry?.cancellable && !entry.cancelSent) this.cancelFor(id).catch(() => {});
  }

  private abort(id: string): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    // Once: after a loop left early (or a cancel()), a finally's abort sent a second cancel.
    const sent = entry.cancellable && entry.sentTo !== undefined;
    if (sent && !entry.abortEndsWait)
      return void (entry.cancelSent || this.cancelSent(id, entry, "aborted").catch(() => {}));
    if (sent && !entry.cancelSent) this.cancelRemote(id).catch(() => {}); // an embed's, a search's: CallShape.abortEndsWait
    this.settle(id, { error: callError("cancelled", "the request was aborted", entry.method) });
  }

  private timeOut(id: string, timeoutMs: number): void {
    const entry = this.pending.get(id);
    // Don't leave the core generating for nobody.
    if (entry) this.failRunning(id, entry, timeoutError(entry.method, timeoutMs));
  }

  private settle(id: string, outcome: Outcome): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    this.pending.delete(id);
    clearTimeout(entry.timer);
    clearTimeout(entry.unconfirmedTimer);
    entry.cleanup();
    entry.stream.settle(outcome);
  }

  // ---- inbound lines -----------------------------------------------------------------------

  /** One line of core `from`'s stdout: it settles only calls written to it (core-launch.ts). */
  receive(line: string, from?: Transport, cut = false): void {
    const read = readLine(line, this.pending, from);
    // One garbled naming its call lost its answer: it fails now; one `cut` by a crash, at its exit.
    if (read.kind === "malformed")
      return void (
        (!cut && this.lose(read.key, (m) => this.brokenMessage(m, read.detail), from)) ||
        this.reportMalformed(read.detail)
      );
    if (read.kind === "no_request") return void this.noRequestError(read.msg, from);
    const entry = this.pending.get(read.key);
    if (entry && (!from || entry.sentTo === from)) this.deliver(read.key, entry, read.msg, line);
    else this.log("debug", `ignored ${read.msg.type} for request ${read.key}, which is no longer pending`);
  }

  /**
   * An error for no request. One for a request line over the core's max_line_bytes (its id never
   * read) says the line's size: the oldest call written as a line of that size is the one refused,
   * and it fails now with that error rather than waiting for good (a chat has no time limit).
   */
  private noRequestError(msg: Record<string, unknown>, from: Transport | undefined): void {
    const data = isObject(msg.data) ? msg.data : undefined;
    const key =
      typeof data?.line_bytes === "number" ? sentAsLineOf(this.pending, data.line_bytes, from) : undefined;
    const entry = key === undefined ? undefined : this.pending.get(key);
    if (key && entry && typeof msg.code === "string" && typeof msg.message === "string")
      this.settle(key, { error: errorOfMessage(msg, entry.method) });
    else
      this.log("warn", `core reported an error for no request: ${asText(msg.code)}: ${asText(msg.message)}`);
  }

  /**
   * A line of the core's stdout longer than maxLineBytes, skipped. Its start (`head`) names its
   * request (the core writes `{"id":…` first): that call fails now with `protocol_error`, not at its
   * time limit; one `cut` by a crash (never whole) with the exit's core_exited, as receive() does.
   */
  oversizeLine(bytes: number, head = "", maxLineBytes?: number, from?: Transport, cut = false): void {
    const limit = maxLineBytes === undefined ? "maxLineBytes" : `maxLineBytes (${maxLineBytes})`;
    this.reportMalformed(`a ${bytes}-byte line exceeds ${limit}`);
    if (!cut) this.lose(lineKey(head, this.pending, from), (m) => oversizeAnswerError(m, bytes, limit), from);
  }

  /** A line of call `key` from core `from` was lost (too long, not JSON). False: no such call of it. */
  private lose(key: string | undefined, error: (method: string) => LocalAiError, from?: Transport): boolean {
    const entry = key === undefined ? undefined : this.pending.get(key);
    if (key === undefined || !entry || (from && entry.sentTo !== from)) return false;
    this.failRunning(key, entry, error(entry.method));
    return true;
  }

  /** Failed here (timed out, a lost or broken line), a stream is cancelled on the core: none reads it. */
  private failRunning(key: string, entry: Pending, error: LocalAiError): void {
    this.settle(key, { error });
    if (entry.cancellable && entry.sentTo !== undefined && this.route.kind === "send")
      this.cancelRemote(key).catch(() => {});
  }

  /** Hands a message to the pending call it answers. */
  private deliver(key: string, entry: Pending, msg: Record<string, unknown>, line: string): void {
    switch (msg.type) {
      case "event":
        if (typeof msg.event !== "string")
          this.protocolError(key, entry, `event without a name: ${clip(line)}`);
        else if (entry.filterChatEvents && !isChatEventName(msg.event))
          entry.onOtherEvent?.(msg as unknown as GenericEvent);
        else entry.stream.pushEvent(msg, Buffer.byteLength(line, "utf8"));
        return;
      case "result":
        if (!("result" in msg))
          this.protocolError(key, entry, `result message without a result: ${clip(line)}`);
        else this.settle(key, { result: msg.result });
        return;
      case "error":
        if (typeof msg.code !== "string" || typeof msg.message !== "string") {
          this.protocolError(key, entry, `error message without code/message: ${clip(line)}`);
          return;
        }
        this.settle(key, { error: errorOfMessage(msg, entry.method) });
        return;
      default:
        this.reportMalformed(`unknown message type ${JSON.stringify(msg.type)}: ${clip(line)}`);
    }
  }

  private protocolError(id: string, entry: Pending, detail: string): void {
    this.failRunning(id, entry, this.brokenMessage(entry.method, detail));
  }

  /** The `protocol_error` of a call of `method`; the broken message is counted and logged. */
  private brokenMessage(method: string, detail: string): LocalAiError {
    this.malformed++;
    this.log("warn", `protocol error from the core: ${detail}`);
    return callError("protocol_error", `the core sent a broken message: ${detail}`, method);
  }

  private reportMalformed(detail: string): void {
    this.malformed++;
    this.log("warn", `ignored a line from the core: ${detail}`);
  }

  private log(level: "warn" | "debug", message: string): void {
    if (level === "warn") this.logger.warn(message);
    else this.logger.debug?.(message);
  }
}
