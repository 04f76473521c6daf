import { readCallOptions } from "./call-options.ts";
import { checkClientOptions } from "./check-client-options.ts";
import {
  CLIENT_DEFAULTS,
  type LocalAiClientOptions,
  type ShutdownOptions,
  withNumberDefaults,
} from "./client-options.ts";
import { Connection } from "./connection.ts";
import { CoreLifecycle } from "./core-lifecycle.ts";
import { DocumentsApi } from "./documents-api.ts";
import { LocalAiError } from "./errors.ts";
import { guardHostCallbacks } from "./host-callbacks.ts";
import type { CallOptions } from "./host-types.ts";
import { type ModelsApi, modelsApi } from "./models-api.ts";
import type { PlanParams, RequestId } from "./protocol-types.ts";
import type { RequestStream } from "./request-stream.ts";
import { SessionsApi, UsersApi } from "./sessions-api.ts";
import type {
  ChatEvent,
  ChatParams,
  ChatResult,
  CoreStatusResult,
  DoctorResult,
  EmbedParams,
  EmbedResult,
  GenericEvent,
  InitializeResult,
  PlanResult,
  PullEvent,
  PullParams,
  PullResult,
  StatusResult,
  WarmupEvent,
  WarmupParams,
  WarmupResult,
} from "./types.ts";

export interface ChatOptions extends CallOptions {
  /** Events of this chat whose name is not a known chat event (e.g. warm-up progress). */
  onOtherEvent?: (event: GenericEvent) => void;
}

export type ChatStream = RequestStream<ChatEvent, ChatResult>;

/**
 * What plan()'s first argument takes: the plan param `model`, and the call options, told apart
 * by key (the `plan` method has no `timeoutMs` or `signal` param), so `plan({ timeoutMs })`
 * written before `model` existed keeps its meaning.
 */
export type PlanOptions = Pick<PlanParams, "model"> & CallOptions;

/** What a started client has for sure: the core's answer to initialize. */
export interface StartedInfo {
  readonly info: InitializeResult;
}

/** A client whose start() has resolved: `info` is set. */
export type StartedLocalAiClient = LocalAiClient & StartedInfo;

/**
 * A host's handle on one local-ai core: spawns `local-ai serve-stdio`, runs the initialize
 * handshake, and turns requests into promises and event streams. Every call ends: with its
 * result, a LocalAiError from the core, or a LocalAiError of the client's own (`core_exited`,
 * `timeout`, `protocol_error`, `client_closed`, `core_backlog`).
 *
 * This class is the public surface: the core's lifecycle (launch, exits, restarts, stopping)
 * lives in its CoreLifecycle (core-lifecycle.ts), the requests themselves in its Connection.
 */
export class LocalAiClient {
  /** The core's answer to initialize (refreshed on each restart). */
  info: InitializeResult | undefined;
  /**
   * The user's conversations: list, get, rename, delete, search, export
   * (docs/protocol.md#conversations-sessions-and-usersdelete).
   */
  readonly sessions: SessionsApi;
  /** `users.delete`: erase a user's data for good. */
  readonly users: UsersApi;
  /** Documents the assistant can recall: add, list, delete (docs/protocol.md "Documents"). */
  readonly documents: DocumentsApi;
  /**
   * `client.models()`: every GGUF found, with whether it fits; `client.models.load()` and
   * `client.models.unload()` start and stop a model's llama-server (docs/models.md#several-models).
   */
  readonly models: ModelsApi;

  private readonly connection: Connection;
  private readonly lifecycle: CoreLifecycle;
  private readonly requestTimeoutMs: number;
  /** An option it cannot run with (check-client-options.ts): start() rejects with it. */
  private readonly invalidOptions: LocalAiError | undefined;

  constructor(hostOptions: LocalAiClientOptions) {
    this.invalidOptions = checkClientOptions(hostOptions);
    // Options that are no object (a plain-JS host's `new LocalAiClient()`) threw a TypeError here.
    const given = hostOptions !== null && typeof hostOptions === "object" ? hostOptions : { binary: "" };
    // The host's callbacks never throw into the client (host-callbacks.ts).
    const options = withNumberDefaults(guardHostCallbacks(given));
    this.requestTimeoutMs = options.requestTimeoutMs ?? CLIENT_DEFAULTS.requestTimeoutMs;
    this.connection = new Connection({
      requestTimeoutMs: this.requestTimeoutMs,
      streamTimeoutMs: options.streamTimeoutMs,
      maxBufferedEvents: options.maxBufferedEvents ?? CLIENT_DEFAULTS.maxBufferedEvents,
      maxBufferedBytes: options.maxBufferedBytes ?? CLIENT_DEFAULTS.maxBufferedBytes,
      logger: options.logger,
    });
    this.lifecycle = new CoreLifecycle(options, this.connection, (info) => {
      this.info = info;
    });
    // Never spawned: its calls fail as its start() does (until kill() or close() closes it).
    const invalid = this.invalidOptions;
    if (invalid)
      this.connection.refuse(
        (method) => new LocalAiError(invalid.code, invalid.message, invalid.data, method),
      );
    const request = <R>(method: string, params: Record<string, unknown>, callOptions?: CallOptions) =>
      this.request<R>(method, params, callOptions);
    // Cancellable by its id, timed as a short call: an abort or the time limit also stops the core's work.
    const shortCancellable =
      (abortEndsWait: boolean) =>
      <R>(method: string, params: Record<string, unknown>, callOptions: CallOptions = {}) =>
        this.connection.open<never, R>(method, params, callOptions, {
          cancellable: true,
          abortEndsWait,
          maxBuffered: 0,
          defaultTimeoutMs: this.requestTimeoutMs,
        }).result;
    // An abort rejects a search at once, so one typed past never resolves with its stale hits.
    this.sessions = new SessionsApi(request, shortCancellable(true));
    this.users = new UsersApi(request);
    const open = <E, R>(method: string, params: Record<string, unknown>, callOptions: CallOptions) =>
      this.connection.open<E, R>(method, params, callOptions, { cancellable: true });
    this.documents = new DocumentsApi(request, open);
    // models.unload (docs/protocol.md) is not ended by an abort at once: one that had begun
    // answers what it unloaded.
    this.models = modelsApi(request, open, shortCancellable(false));
  }

  /**
   * Creates a client and starts its core; rejects when the core cannot be started or
   * initialized. The client it resolves with has `info`.
   */
  static async start(options: LocalAiClientOptions): Promise<StartedLocalAiClient> {
    return new LocalAiClient(options).start();
  }

  /** Spawns the core and runs initialize; resolves, with this client (now with `info`), once it answered. */
  start(): Promise<this & StartedInfo> {
    if (this.invalidOptions) return Promise.reject(this.invalidOptions);
    return this.lifecycle.started().then(() => this as this & StartedInfo);
  }

  /** The core's process id while it runs. */
  get pid(): number | undefined {
    return this.lifecycle.pid;
  }

  get running(): boolean {
    return this.lifecycle.running;
  }

  /** Lines from the core that were not protocol messages, ignored. */
  get malformedLines(): number {
    return this.connection.malformedLines;
  }

  /**
   * One chat turn: iterate it for its events, await `.result` for the final answer. Here and in
   * every call, `null` options (a plain-JS host's) are none: `options?.`, as a default `= {}`
   * covers only `undefined`; Connection.open() reads the rest.
   */
  chat(params: ChatParams = {}, options: ChatOptions = {}): ChatStream {
    // Read once, here: a getter that throws fails the chat's result (call-options.ts).
    const read = readCallOptions(options, "chat");
    return this.connection.open<ChatEvent, ChatResult>("chat", params, read, {
      cancellable: true,
      filterChatEvents: true,
      onOtherEvent:
        read instanceof LocalAiError ? undefined : (read.onOtherEvent as ChatOptions["onOtherEvent"]),
    });
  }

  /** Starts llama-server ahead of the first chat; its `warmup_progress` events report progress. */
  warmup(params: WarmupParams = {}, options: CallOptions = {}): RequestStream<WarmupEvent, WarmupResult> {
    return this.connection.open<WarmupEvent, WarmupResult>("warmup", params, options, { cancellable: true });
  }

  /** Any method as a stream of untyped events (test methods, methods newer than this client). */
  stream<R = unknown>(
    method: string,
    params: Record<string, unknown> = {},
    options: CallOptions & { cancellable?: boolean } = {},
  ): RequestStream<GenericEvent, R> {
    const read = readCallOptions(options, method);
    const cancellable =
      read instanceof LocalAiError ? true : ((read.cancellable as boolean | undefined) ?? true);
    return this.connection.open(method, params, read, { cancellable });
  }

  /** Any method, by name, for its result alone. */
  request<R = unknown>(
    method: string,
    params: Record<string, unknown> = {},
    options: CallOptions = {},
  ): Promise<R> {
    return this.connection.open<never, R>(method, params, options, { cancellable: false, maxBuffered: 0 })
      .result;
  }

  ping(options?: CallOptions): Promise<StatusResult> {
    return this.request("ping", {}, options);
  }

  doctor(options?: CallOptions): Promise<DoctorResult> {
    return this.request("doctor", {}, options);
  }

  /**
   * The launch plan of `model` (a configured name, a GGUF path or `hf:` reference), else of
   * model.path. `timeoutMs` and `signal` are call options wherever they are given:
   * `plan({ model, timeoutMs })` and `plan({ model }, { timeoutMs })` are the same call.
   */
  plan(params: PlanOptions = {}, options: CallOptions = {}): Promise<PlanResult> {
    // `?? {}`: a plain-JS host's `plan(null)`.
    const { timeoutMs, signal, ...planParams } = params ?? {};
    const read = readCallOptions(options, "plan");
    const merged =
      read instanceof LocalAiError
        ? read
        : { timeoutMs: read.timeoutMs ?? timeoutMs, signal: read.signal ?? signal };
    return this.connection.open<never, PlanResult>("plan", planParams, merged, {
      cancellable: false,
      maxBuffered: 0,
    }).result;
  }

  /**
   * Downloads a GGUF into the Hugging Face cache (docs/models.md); its `download_progress` events
   * report progress. Cancellable like a chat: the partial file, when it holds a byte (the error's
   * `data.bytes_done` over 0), is kept for the next pull to resume.
   */
  pull(params: PullParams, options: CallOptions = {}): RequestStream<PullEvent, PullResult> {
    return this.connection.open<PullEvent, PullResult>("pull", params, options, { cancellable: true });
  }

  /**
   * One vector per input string (docs/protocol.md#embed), on `model`, else memory.embedding_model,
   * else the first configured embedding model. Timed like a short call; an abort or the time
   * limit also cancels it on the core's side, so a batch nobody waits for is not embedded. A pure
   * read: an abort rejects it at once, so one answered as the cancel crossed never resolves.
   */
  embed(params: EmbedParams, options: CallOptions = {}): Promise<EmbedResult> {
    return this.connection.open<never, EmbedResult>("embed", params, options, {
      cancellable: true,
      abortEndsWait: true,
      maxBuffered: 0,
      defaultTimeoutMs: this.requestTimeoutMs,
    }).result;
  }

  /**
   * llama-server's state, memory, slots and restarts, and the requests in flight
   * (docs/protocol.md#status).
   */
  status(options?: CallOptions): Promise<CoreStatusResult> {
    return this.request("status", {}, options);
  }

  /**
   * Cancels an in-flight chat by its request id (a ChatStream's `id`); without one, the only
   * active chat. Resolves with whether the core caught it in flight.
   */
  cancel(requestId?: RequestId, options?: CallOptions): Promise<boolean> {
    const cancelling = this.connection.cancel(requestId, options);
    // Awaited, it rejects; left unawaited (as chat.cancel() is), its rejection (a core that
    // exited) must not end a Node host as an unhandled one, as no other call's does.
    cancelling.catch(() => {});
    return cancelling;
  }

  /**
   * Graceful stop: the shutdown request (the core cancels its chats, stops llama-server and its
   * MCP servers, then answers), then waits for the process to exit, and kills it past
   * `timeoutMs`, but never before the core could stop what it started (see ShutdownOptions).
   * Called again while a stop is under way, it returns that stop's promise; after, it resolves.
   */
  shutdown(options: ShutdownOptions = {}): Promise<void> {
    return this.lifecycle.shutdown(options);
  }

  /** Like shutdown(), never rejecting: for app-quit paths. Same minimum wait as shutdown(). */
  async close(options: ShutdownOptions = {}): Promise<void> {
    try {
      await this.shutdown(options);
    } catch {
      this.kill();
    }
  }

  /**
   * Kills the core at once (SIGKILL); pending calls reject with `client_closed`. The core gets
   * no chance to stop llama-server, which runs on until the next core with the same data folder
   * stops it; prefer close() unless the host is itself being torn down.
   */
  kill(): void {
    this.lifecycle.kill();
  }
}
