import {
  CLIENT_DEFAULTS,
  type LocalAiClientOptions,
  RESTART_DEFAULTS,
  type ShutdownOptions,
} from "./client-options.ts";
import { Connection } from "./connection.ts";
import { initializeCore, spawnCore } from "./core-launch.ts";
import type { CoreProcess } from "./core-process.ts";
import { DocumentsApi } from "./documents-api.ts";
import { coreExitedError, LocalAiError } from "./errors.ts";
import { stopGracefully } from "./graceful-stop.ts";
import type { CallOptions, ExitInfo } from "./host-types.ts";
import type { RequestId } from "./protocol-types.ts";
import type { RequestStream } from "./request-stream.ts";
import { Restarts } from "./restarts.ts";
import { SessionsApi, UsersApi } from "./sessions-api.ts";
import { DEFAULT_CORE_STOP_GRACE_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS } from "./shutdown-timing.ts";
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
  ModelsResult,
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

/** What a started client has for sure: the core's answer to initialize. */
export interface StartedInfo {
  readonly info: InitializeResult;
}

/** A client whose start() has resolved: `info` is set. */
export type StartedLocalAiClient = LocalAiClient & StartedInfo;

/**
 * idle → starting → ready; an unexpected exit: ready → restarting → starting (or → failed when
 * restarts are off or spent); shutdown()/close()/kill(): any → closed, for good.
 */
type State = "idle" | "starting" | "ready" | "restarting" | "failed" | "closed";

/**
 * A host's handle on one local-ai core: spawns `local-ai serve-stdio`, runs the initialize
 * handshake, and turns requests into promises and event streams. Every call ends: with its
 * result, a LocalAiError from the core, or a LocalAiError of the client's own (`core_exited`,
 * `timeout`, `protocol_error`, `client_closed`).
 *
 * This class is the core's lifecycle: when to launch (core-launch.ts: spawn, initialize), what
 * an exit means (a restart with back-off, restarts.ts), how to stop (graceful-stop.ts); the
 * requests themselves live in its Connection.
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

  private state: State = "idle";
  private process: CoreProcess | undefined;
  /** Counts launches, so the exit of a replaced process is told from the current one's. */
  private generation = 0;
  private ready: Promise<void> | undefined;
  private startedAt = 0;
  /** Undefined when restarts are off. */
  private readonly restarts: Restarts | undefined;
  private readonly stopGraceMs: number;
  private readonly connection: Connection;

  constructor(private readonly options: LocalAiClientOptions) {
    const r = options.restart;
    this.restarts = r ? new Restarts({ ...RESTART_DEFAULTS, ...(r === true ? {} : r) }) : undefined;
    const grace = options.stopGraceMs;
    this.stopGraceMs =
      grace !== undefined && grace >= 0 && Number.isFinite(grace) ? grace : DEFAULT_CORE_STOP_GRACE_MS;
    this.connection = new Connection({
      requestTimeoutMs: options.requestTimeoutMs ?? CLIENT_DEFAULTS.requestTimeoutMs,
      streamTimeoutMs: options.streamTimeoutMs,
      maxBufferedEvents: options.maxBufferedEvents ?? CLIENT_DEFAULTS.maxBufferedEvents,
      logger: options.logger,
    });
    const request = <R>(method: string, params: Record<string, unknown>, callOptions?: CallOptions) =>
      this.request<R>(method, params, callOptions);
    this.sessions = new SessionsApi(request);
    this.users = new UsersApi(request);
    this.documents = new DocumentsApi(request, (method, params, callOptions) =>
      this.connection.open(method, params, callOptions, { cancellable: true }),
    );
    this.enter("idle");
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
    return this.started().then(() => this as this & StartedInfo);
  }

  private started(): Promise<void> {
    if (this.state === "closed") return Promise.reject(closedError());
    if (!this.ready || this.state === "failed") {
      this.restarts?.reset();
      this.ready = this.launch().catch((err: unknown) => {
        if (this.state !== "closed") this.enter("failed");
        const error = err instanceof LocalAiError ? err : new LocalAiError("core_exited", String(err));
        // Calls queued behind the start-up fail with its error.
        this.connection.failAll(error);
        throw error;
      });
      this.ready.catch(() => {});
    }
    return this.ready;
  }

  /** The core's process id while it runs. */
  get pid(): number | undefined {
    return this.process?.running ? this.process.pid : undefined;
  }

  get running(): boolean {
    return this.state === "ready";
  }

  /** Lines from the core that were not protocol messages, ignored. */
  get malformedLines(): number {
    return this.connection.malformedLines;
  }

  /** One chat turn: iterate it for its events, await `.result` for the final answer. */
  chat(params: ChatParams = {}, options: ChatOptions = {}): ChatStream {
    return this.connection.open<ChatEvent, ChatResult>("chat", params, options, {
      cancellable: true,
      filterChatEvents: true,
      onOtherEvent: options.onOtherEvent,
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
    return this.connection.open(method, params, options, { cancellable: options.cancellable ?? true });
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

  plan(options?: CallOptions): Promise<PlanResult> {
    return this.request("plan", {}, options);
  }

  /** Every GGUF in the Hugging Face cache and beside the config, with whether it fits (docs/models.md). */
  models(options?: CallOptions): Promise<ModelsResult> {
    return this.request("models", {}, options);
  }

  /**
   * Downloads a GGUF into the Hugging Face cache (docs/models.md); its `download_progress` events
   * report progress. Cancellable like a chat: the partial file is kept for the next pull to resume.
   */
  pull(params: PullParams, options: CallOptions = {}): RequestStream<PullEvent, PullResult> {
    return this.connection.open<PullEvent, PullResult>("pull", params, options, { cancellable: true });
  }

  /**
   * One vector per input string (docs/protocol.md#embed), on `model`, else memory.embedding_model,
   * else the first configured embedding model.
   */
  embed(params: EmbedParams, options?: CallOptions): Promise<EmbedResult> {
    return this.request("embed", params, options);
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
    return this.connection.cancelRemote(requestId, options);
  }

  /**
   * Graceful stop: the shutdown request (the core cancels its chats, stops llama-server and its
   * MCP servers, then answers), then waits for the process to exit, and kills it past
   * `timeoutMs`, but never before the core could stop what it started (see ShutdownOptions).
   */
  async shutdown(options: ShutdownOptions = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_SHUTDOWN_TIMEOUT_MS;
    const proc = this.process;
    const wasRunning = this.state === "ready" && proc?.running;
    this.enter("closed");
    if (wasRunning && proc)
      await stopGracefully(this.connection, proc, {
        timeoutMs,
        stopGraceMs: this.stopGraceMs,
        logger: this.options.logger,
      });
    else proc?.kill("SIGKILL");
    this.connection.failAll(closedError());
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
    this.enter("closed");
    this.process?.kill("SIGKILL");
    this.connection.failAll(closedError());
  }

  // ---- state -------------------------------------------------------------------------------

  /** Every state change goes through here, so the connection's route always matches the state. */
  private enter(state: State): void {
    this.state = state;
    switch (state) {
      case "idle":
        this.connection.refuse(
          (method) =>
            new LocalAiError("core_exited", "the core was not started (call start())", undefined, method),
        );
        return;
      case "starting":
      case "restarting":
        // Calls made now wait for the core to be ready (within their own time limit).
        this.connection.hold();
        return;
      case "ready":
        if (this.process) this.connection.attach(this.process);
        return;
      case "failed":
        this.connection.refuse(
          (method) =>
            new LocalAiError("core_exited", "the core has exited and is not restarting", undefined, method),
        );
        return;
      case "closed":
        this.connection.refuse((method) => closedError(method));
    }
  }

  // ---- launching and restarting ------------------------------------------------------------

  private async launch(): Promise<void> {
    this.enter("starting");
    const generation = ++this.generation;
    const proc = spawnCore(this.options, this.connection, (info) => this.handleExit(generation, info));
    this.process = proc;
    this.startedAt = Date.now();
    this.info = await initializeCore(this.options, this.connection, proc);
    if (this.state !== "starting" || generation !== this.generation) {
      throw new LocalAiError("core_exited", "the core exited during start-up");
    }
    this.enter("ready");
  }

  private handleExit(generation: number, info: ExitInfo): void {
    if (generation !== this.generation) return;
    const proc = this.process;
    const expected = this.state === "closed";
    this.options.onExit?.({ ...info, expected });
    const error = coreExitedError(info);
    // Requests written to this process can never be answered now.
    this.connection.failAll(expected ? closedError() : error, (sentTo) => sentTo === proc);
    if (expected) return;

    if (this.state === "ready") this.restarts?.servedFor(Date.now() - this.startedAt);
    // A core that dies during its own start-up is that launch's failure, handled by its caller.
    if (this.state === "starting") return;
    if (!this.restarts || this.restarts.spent) {
      this.enter("failed");
      this.connection.failAll(error);
      return;
    }
    this.enter("restarting");
    this.ready = this.restartLoop(this.restarts, error);
    this.ready.catch(() => {});
  }

  /** Relaunches with a doubling delay until a launch succeeds or the attempts run out. */
  private async restartLoop(restarts: Restarts, exitErr: LocalAiError): Promise<void> {
    let lastError = exitErr;
    while (!restarts.spent) {
      const { attempt, delayMs } = restarts.next();
      this.options.onRestart?.({ attempt, delayMs });
      await delay(delayMs);
      if (this.state !== "restarting") throw closedError();
      try {
        await this.launch();
        return;
      } catch (err) {
        if ((this.state as State) === "closed") throw closedError();
        this.enter("restarting");
        if (err instanceof LocalAiError) lastError = err;
      }
    }
    this.enter("failed");
    this.connection.failAll(lastError);
    throw lastError;
  }
}

function closedError(method?: string): LocalAiError {
  return new LocalAiError("client_closed", "the client was shut down", undefined, method);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
