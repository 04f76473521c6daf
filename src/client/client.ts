import { isChatEventName } from "./chat-events.ts";
import { CoreProcess, type ExitInfo, type SpawnFunction } from "./core-process.ts";
import { LocalAiError, type LocalAiErrorCode } from "./errors.ts";
import type { RequestId } from "./protocol-types.ts";
import { RequestStream } from "./request-stream.ts";
import type {
  CancelResult,
  ChatEvent,
  ChatParams,
  ChatResult,
  DoctorResult,
  GenericEvent,
  InitializeParams,
  InitializeResult,
  PlanResult,
  StatusResult,
} from "./types.ts";

export interface RestartOptions {
  /** Restarts allowed in a row before the client gives up (default 3). */
  maxRestarts?: number;
  /** Delay before the first restart; doubles on each further one (default 500 ms). */
  initialDelayMs?: number;
  /** Ceiling of the doubling delay (default 10 s). */
  maxDelayMs?: number;
  /** A core that stayed up this long resets the restart count (default 60 s). */
  resetAfterMs?: number;
}

export interface ClientLogger {
  warn(message: string): void;
  debug?(message: string): void;
}

export interface LocalAiClientOptions {
  /** Path of the local-ai executable. */
  binary: string;
  /** Passed as `--config FILE`; relative paths resolve against `cwd`. */
  config?: string;
  /** Replaces the whole argument list (default `serve-stdio [--config FILE]`). */
  args?: string[];
  cwd?: string;
  /** The core's environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** Params of the initialize handshake run on every (re)start. */
  initialize?: InitializeParams;
  /** Time limit of calls other than streams (chat, warmup, stream()); default 60 s. 0 = none. */
  requestTimeoutMs?: number;
  /** Time limit of streams (chat, warmup, stream()); default none. */
  streamTimeoutMs?: number;
  /** Restart the core with back-off when it exits unexpectedly; off by default. */
  restart?: boolean | RestartOptions;
  /** Events held for a stream nobody reads, before new ones are dropped (default 10 000). */
  maxBufferedEvents?: number;
  /** Longest line accepted from the core (default 16 MiB). */
  maxLineBytes?: number;
  /** Lines of the core's stderr kept for error reports (default 50). */
  stderrTailLines?: number;
  /** Where the client reports what it ignores (malformed lines, late answers). Default: silent. */
  logger?: ClientLogger;
  /** Every line the core writes to stderr (its logs). */
  onStderr?: (line: string) => void;
  /** The core process ended; `expected` is true after shutdown()/close()/kill(). */
  onExit?: (info: ExitInfo & { expected: boolean }) => void;
  /** A restart is scheduled after an unexpected exit. */
  onRestart?: (info: { attempt: number; delayMs: number }) => void;
  /** Test seam: the function that starts the process (default node:child_process spawn). */
  spawn?: SpawnFunction;
}

export interface CallOptions {
  /** Overrides the client's default time limit for this call; 0 = none. */
  timeoutMs?: number;
  /** Aborting cancels the call (a chat is cancelled on the core's side). */
  signal?: AbortSignal;
}

export interface ChatOptions extends CallOptions {
  /** Events of this chat whose name is not a known chat event (e.g. warm-up progress). */
  onOtherEvent?: (event: GenericEvent) => void;
}

export type ChatStream = RequestStream<ChatEvent, ChatResult>;

type State = "idle" | "starting" | "ready" | "restarting" | "failed" | "closed";

interface Pending {
  stream: RequestStream<unknown, unknown>;
  method: string;
  cancellable: boolean;
  /** The process generation the request was written to; undefined while still queued. */
  sentTo: number | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  onOtherEvent: ((event: GenericEvent) => void) | undefined;
  filterChatEvents: boolean;
  cleanup: () => void;
  params: unknown;
}

const DEFAULTS = {
  requestTimeoutMs: 60_000,
  maxBufferedEvents: 10_000,
  maxLineBytes: 16 * 1024 * 1024,
  stderrTailLines: 50,
};
const RESTART_DEFAULTS: Required<RestartOptions> = {
  maxRestarts: 3,
  initialDelayMs: 500,
  maxDelayMs: 10_000,
  resetAfterMs: 60_000,
};

/**
 * A host's handle on one local-ai core: spawns `local-ai serve-stdio`, runs the initialize
 * handshake, and turns requests into promises and event streams. Every call ends: with its
 * result, a LocalAiError from the core, or a LocalAiError of the client's own (`core_exited`,
 * `timeout`, `protocol_error`, `client_closed`).
 */
export class LocalAiClient {
  /** The core's answer to initialize (refreshed on each restart). */
  info: InitializeResult | undefined;
  /** Lines from the core that were not protocol messages, ignored. */
  malformedLines = 0;

  private state: State = "idle";
  private process: CoreProcess | undefined;
  private generation = 0;
  private ready: Promise<void> | undefined;
  private nextId = 1;
  private readonly pending = new Map<string, Pending>();
  private restartAttempts = 0;
  private startedAt = 0;
  private readonly restart: Required<RestartOptions> | undefined;

  constructor(private readonly options: LocalAiClientOptions) {
    const r = options.restart;
    this.restart = r ? { ...RESTART_DEFAULTS, ...(r === true ? {} : r) } : undefined;
  }

  /** Creates a client and starts its core; rejects when the core cannot be started or initialized. */
  static async start(options: LocalAiClientOptions): Promise<LocalAiClient> {
    const client = new LocalAiClient(options);
    await client.start();
    return client;
  }

  /** Spawns the core and runs initialize; resolves once it answered. */
  start(): Promise<void> {
    if (this.state === "closed") return Promise.reject(this.closedError());
    if (!this.ready || this.state === "failed") {
      this.restartAttempts = 0;
      this.ready = this.launch().catch((err: unknown) => {
        this.state = this.state === "closed" ? "closed" : "failed";
        const error = err instanceof LocalAiError ? err : new LocalAiError("core_exited", String(err));
        // Calls queued behind the start-up fail with its error.
        this.failAll(() => error);
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

  /** One chat turn: iterate it for its events, await `.result` for the final answer. */
  chat(params: ChatParams = {}, options: ChatOptions = {}): ChatStream {
    return this.open<ChatEvent, ChatResult>("chat", params, options, {
      cancellable: true,
      filterChatEvents: true,
      onOtherEvent: options.onOtherEvent,
    });
  }

  /** Starts llama-server ahead of the first chat; its events report progress. */
  warmup(
    params: Record<string, unknown> = {},
    options: CallOptions = {},
  ): RequestStream<GenericEvent, unknown> {
    return this.open("warmup", params, options, { cancellable: true });
  }

  /** Any method as a stream of untyped events (test methods, methods newer than this client). */
  stream<R = unknown>(
    method: string,
    params: Record<string, unknown> = {},
    options: CallOptions & { cancellable?: boolean } = {},
  ): RequestStream<GenericEvent, R> {
    return this.open(method, params, options, { cancellable: options.cancellable ?? true });
  }

  /** Any method, by name, for its result alone. */
  request<R = unknown>(
    method: string,
    params: Record<string, unknown> = {},
    options: CallOptions = {},
  ): Promise<R> {
    return this.open<never, R>(method, params, options, { cancellable: false, maxBuffered: 0 }).result;
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

  /**
   * Cancels an in-flight chat by its request id (a ChatStream's `id`); without one, the only
   * active chat. Resolves with whether the core caught it in flight.
   */
  async cancel(requestId?: RequestId, options?: CallOptions): Promise<boolean> {
    const params = requestId === undefined ? {} : { request_id: requestId };
    const answer = await this.request<CancelResult>("cancel", params, options);
    return answer.cancelled;
  }

  /**
   * Graceful stop: the shutdown request (the core cancels its chats and stops llama-server),
   * then waits for the process to exit; past `timeoutMs` (default 5 s) it is killed.
   */
  async shutdown(options: { timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? 5000;
    const proc = this.process;
    const wasRunning = this.state === "ready" && proc?.running;
    this.state = "closed";
    if (wasRunning && proc) {
      const deadline = Date.now() + timeoutMs;
      try {
        await this.sendNow<StatusResult>("shutdown", {}, timeoutMs, proc);
      } catch (err) {
        this.log("warn", `shutdown request failed: ${(err as Error).message}`);
      }
      proc.endInput();
      const left = Math.max(0, deadline - Date.now());
      const exited = await withinMs(proc.waitForExit(), left);
      if (!exited) {
        this.log("warn", `core did not exit within ${timeoutMs} ms of shutdown; killing it`);
        proc.kill("SIGKILL");
        await proc.waitForExit();
      }
    } else {
      proc?.kill("SIGKILL");
    }
    this.failAll(() => this.closedError());
  }

  /** Like shutdown(), never rejecting: for app-quit paths. */
  async close(options: { timeoutMs?: number } = {}): Promise<void> {
    try {
      await this.shutdown(options);
    } catch {
      this.kill();
    }
  }

  /** Kills the core at once; pending calls reject with `client_closed`. */
  kill(): void {
    this.state = "closed";
    this.process?.kill("SIGKILL");
    this.failAll(() => this.closedError());
  }

  // ---- launching and restarting ------------------------------------------------------------

  private async launch(): Promise<void> {
    this.state = "starting";
    const generation = ++this.generation;
    const opts = this.options;
    const args = opts.args ?? ["serve-stdio", ...(opts.config ? ["--config", opts.config] : [])];
    const proc = new CoreProcess(
      {
        command: opts.binary,
        args,
        cwd: opts.cwd,
        env: opts.env,
        maxLineBytes: opts.maxLineBytes ?? DEFAULTS.maxLineBytes,
        stderrTailLines: opts.stderrTailLines ?? DEFAULTS.stderrTailLines,
        spawn: opts.spawn,
      },
      {
        onLine: (line) => this.handleLine(line),
        onOversizeLine: (bytes) => this.malformed(`a ${bytes}-byte line exceeds maxLineBytes`),
        onStderrLine: (line) => opts.onStderr?.(line),
        onExit: (info) => this.handleExit(generation, info),
      },
    );
    this.process = proc;
    this.startedAt = Date.now();
    try {
      const timeout = opts.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs;
      this.info = await this.sendNow<InitializeResult>(
        "initialize",
        opts.initialize ?? { protocol_versions: [1] },
        timeout,
        proc,
      );
    } catch (err) {
      proc.kill("SIGKILL");
      throw err;
    }
    if (this.state !== "starting" || generation !== this.generation) {
      throw new LocalAiError("core_exited", "the core exited during start-up");
    }
    this.state = "ready";
    this.flushQueued();
  }

  private handleExit(generation: number, info: ExitInfo): void {
    if (generation !== this.generation) return;
    const expected = this.state === "closed";
    this.options.onExit?.({ ...info, expected });
    const error = exitError(info);
    // Requests written to this process can never be answered now.
    this.failAll(
      () => (expected ? this.closedError() : error),
      (p) => p.sentTo === generation,
    );
    if (expected) return;

    const uptime = Date.now() - this.startedAt;
    if (this.restart && this.state === "ready" && uptime >= this.restart.resetAfterMs)
      this.restartAttempts = 0;
    // A core that dies during its own start-up is that launch's failure, handled by its caller.
    if (this.state === "starting") return;
    if (!this.restart || this.restartAttempts >= this.restart.maxRestarts) {
      this.state = "failed";
      this.failAll(() => error);
      return;
    }
    this.state = "restarting";
    this.ready = this.restartLoop(this.restart, error);
    this.ready.catch(() => {});
  }

  /** Relaunches with a doubling delay until a launch succeeds or the attempts run out. */
  private async restartLoop(restart: Required<RestartOptions>, exitErr: LocalAiError): Promise<void> {
    let lastError = exitErr;
    while (this.restartAttempts < restart.maxRestarts) {
      const attempt = ++this.restartAttempts;
      const delayMs = Math.min(restart.initialDelayMs * 2 ** (attempt - 1), restart.maxDelayMs);
      this.options.onRestart?.({ attempt, delayMs });
      await delay(delayMs);
      if (this.state !== "restarting") throw this.closedError();
      try {
        await this.launch();
        return;
      } catch (err) {
        if ((this.state as State) === "closed") throw this.closedError();
        this.state = "restarting";
        if (err instanceof LocalAiError) lastError = err;
      }
    }
    this.state = "failed";
    this.failAll(() => lastError);
    throw lastError;
  }

  // ---- requests ----------------------------------------------------------------------------

  private open<E, R>(
    method: string,
    params: unknown,
    options: CallOptions,
    kind: {
      cancellable: boolean;
      filterChatEvents?: boolean;
      onOtherEvent?: ((e: GenericEvent) => void) | undefined;
      maxBuffered?: number;
    },
  ): RequestStream<E, R> {
    const id = String(this.nextId++);
    const maxBuffered = kind.maxBuffered ?? this.options.maxBufferedEvents ?? DEFAULTS.maxBufferedEvents;
    const stream = new RequestStream<E, R>(id, method, maxBuffered, () => this.cancelFor(id));
    const streaming = kind.cancellable;
    const timeoutMs =
      options.timeoutMs ??
      (streaming
        ? this.options.streamTimeoutMs
        : (this.options.requestTimeoutMs ?? DEFAULTS.requestTimeoutMs));
    const entry: Pending = {
      stream: stream as unknown as RequestStream<unknown, unknown>,
      method,
      cancellable: kind.cancellable,
      sentTo: undefined,
      timer: undefined,
      onOtherEvent: kind.onOtherEvent,
      filterChatEvents: kind.filterChatEvents ?? false,
      cleanup: () => {},
      params,
    };
    if (this.state === "closed") {
      stream.settle({ error: this.closedError(method) });
      return stream;
    }
    if (this.state === "failed" || this.state === "idle") {
      const message =
        this.state === "idle"
          ? "the core was not started (call start())"
          : "the core has exited and is not restarting";
      stream.settle({ error: new LocalAiError("core_exited", message, undefined, method) });
      return stream;
    }
    this.pending.set(id, entry);
    if (timeoutMs && timeoutMs > 0) {
      entry.timer = setTimeout(() => this.timeOut(id, timeoutMs), timeoutMs);
    }
    const signal = options.signal;
    if (signal) {
      const onAbort = () => this.abort(id);
      if (signal.aborted) queueMicrotask(onAbort);
      else {
        signal.addEventListener("abort", onAbort, { once: true });
        entry.cleanup = () => signal.removeEventListener("abort", onAbort);
      }
    }
    if (this.state === "ready") this.write(id, entry);
    return stream;
  }

  /** Writes requests that waited for a (re)start. */
  private flushQueued(): void {
    for (const [id, entry] of this.pending) if (entry.sentTo === undefined) this.write(id, entry);
  }

  private write(id: string, entry: Pending): void {
    const proc = this.process;
    if (!proc) {
      this.settle(id, {
        error: new LocalAiError("core_exited", "the core is not running", undefined, entry.method),
      });
      return;
    }
    this.writeTo(proc, id, entry);
  }

  /**
   * A failed write means the process is gone or going: the call then fails with the exit's
   * error, now if the exit is known, else when it is reported.
   */
  private writeTo(proc: CoreProcess, id: string, entry: Pending): void {
    entry.sentTo = this.generation;
    if (proc.write(JSON.stringify({ id, method: entry.method, params: entry.params }))) return;
    const info = proc.exitInfo;
    if (info) this.settle(id, { error: exitError(info) });
  }

  /** Sends a request to this process now, bypassing the ready gate (initialize, shutdown). */
  private sendNow<R>(method: string, params: unknown, timeoutMs: number, proc: CoreProcess): Promise<R> {
    const id = String(this.nextId++);
    const stream = new RequestStream<never, R>(id, method, 0, async () => false);
    const entry: Pending = {
      stream: stream as unknown as RequestStream<unknown, unknown>,
      method,
      cancellable: false,
      sentTo: undefined,
      timer: timeoutMs > 0 ? setTimeout(() => this.timeOut(id, timeoutMs), timeoutMs) : undefined,
      onOtherEvent: undefined,
      filterChatEvents: false,
      cleanup: () => {},
      params,
    };
    this.pending.set(id, entry);
    this.writeTo(proc, id, entry);
    return stream.result;
  }

  private async cancelFor(id: string): Promise<boolean> {
    const entry = this.pending.get(id);
    if (!entry) return false;
    if (entry.sentTo === undefined) {
      // Never reached the core: cancel it here.
      this.settle(id, {
        error: new LocalAiError("cancelled", "the request was cancelled", undefined, entry.method),
      });
      return true;
    }
    return this.cancel(id);
  }

  private abort(id: string): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    if (entry.cancellable && entry.sentTo !== undefined) {
      // The core answers the chat with `cancelled` once it has stopped it.
      this.cancel(id).catch((err) => this.log("warn", `cancel of ${id} failed: ${(err as Error).message}`));
      return;
    }
    this.settle(id, {
      error: new LocalAiError("cancelled", "the request was aborted", undefined, entry.method),
    });
  }

  private timeOut(id: string, timeoutMs: number): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    this.settle(id, {
      error: new LocalAiError(
        "timeout",
        `${entry.method} got no answer within ${timeoutMs} ms`,
        { timeout_ms: timeoutMs },
        entry.method,
      ),
    });
    // Don't leave the core generating for nobody.
    if (entry.cancellable && entry.sentTo !== undefined && this.state === "ready") {
      this.cancel(id).catch(() => {});
    }
  }

  private settle(id: string, outcome: { result: unknown } | { error: LocalAiError }): void {
    const entry = this.pending.get(id);
    if (!entry) return;
    this.pending.delete(id);
    if (entry.timer) clearTimeout(entry.timer);
    entry.cleanup();
    entry.stream.settle(outcome);
  }

  private failAll(error: () => LocalAiError, which: (p: Pending) => boolean = () => true): void {
    for (const [id, entry] of [...this.pending]) {
      if (!which(entry)) continue;
      const base = error();
      this.settle(id, { error: new LocalAiError(base.code, base.message, base.data, entry.method) });
    }
  }

  // ---- inbound lines -----------------------------------------------------------------------

  private handleLine(line: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(line);
    } catch {
      this.malformed(`not JSON: ${clip(line)}`);
      return;
    }
    if (!isObject(msg) || typeof msg.type !== "string") {
      this.malformed(`not a protocol message: ${clip(line)}`);
      return;
    }
    const key = typeof msg.id === "string" || typeof msg.id === "number" ? String(msg.id) : undefined;
    const entry = key === undefined ? undefined : this.pending.get(key);
    if (msg.type === "error" && msg.id === null) {
      this.log("warn", `core reported an error for no request: ${String(msg.code)}: ${String(msg.message)}`);
      return;
    }
    if (!entry || key === undefined) {
      if (key === undefined) this.malformed(`message without a usable id: ${clip(line)}`);
      else this.log("debug", `ignored ${msg.type} for request ${key}, which is no longer pending`);
      return;
    }
    switch (msg.type) {
      case "event": {
        if (typeof msg.event !== "string") {
          this.protocolError(key, entry, `event without a name: ${clip(line)}`);
          return;
        }
        if (entry.filterChatEvents && !isChatEventName(msg.event)) {
          entry.onOtherEvent?.(msg as unknown as GenericEvent);
          return;
        }
        entry.stream.pushEvent(msg);
        return;
      }
      case "result":
        if (!("result" in msg)) {
          this.protocolError(key, entry, `result message without a result: ${clip(line)}`);
          return;
        }
        this.settle(key, { result: msg.result });
        return;
      case "error": {
        if (typeof msg.code !== "string" || typeof msg.message !== "string") {
          this.protocolError(key, entry, `error message without code/message: ${clip(line)}`);
          return;
        }
        const data = isObject(msg.data) ? msg.data : undefined;
        // Codes newer than this client still come through as they are.
        this.settle(key, {
          error: new LocalAiError(msg.code as LocalAiErrorCode, msg.message, data, entry.method),
        });
        return;
      }
      default:
        this.malformed(`unknown message type ${JSON.stringify(msg.type)}: ${clip(line)}`);
    }
  }

  private protocolError(id: string, entry: Pending, detail: string): void {
    this.malformedLines++;
    this.log("warn", `protocol error from the core: ${detail}`);
    this.settle(id, {
      error: new LocalAiError(
        "protocol_error",
        `the core sent a broken message: ${detail}`,
        undefined,
        entry.method,
      ),
    });
  }

  private malformed(detail: string): void {
    this.malformedLines++;
    this.log("warn", `ignored a line from the core: ${detail}`);
  }

  private log(level: "warn" | "debug", message: string): void {
    const logger = this.options.logger;
    if (level === "warn") logger?.warn(message);
    else logger?.debug?.(message);
  }

  private closedError(method?: string): LocalAiError {
    return new LocalAiError("client_closed", "the client was shut down", undefined, method);
  }
}

function exitError(info: ExitInfo): LocalAiError {
  const how = info.spawnError
    ? `could not be started (${info.spawnError})`
    : info.signal
      ? `was killed by ${info.signal}`
      : `exited with code ${info.code}`;
  return new LocalAiError("core_exited", `the local-ai core ${how}`, {
    exit_code: info.code,
    signal: info.signal,
    ...(info.spawnError ? { spawn_error: info.spawnError } : {}),
    stderr_tail: info.stderrTail,
  });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function clip(line: string): string {
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/** True when the promise settles within `ms`; the timer never outlives it (it would hold a Node host open). */
async function withinMs(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
