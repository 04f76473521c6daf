import type { LlamaEndpoint } from "../llama/http.ts";
import type { SpareConnection } from "../llama/spare-connection.ts";
import type { LaunchView } from "./launch.ts";
import type { SupervisorSnapshot } from "./snapshot.ts";
import type { StartProgress } from "./start-progress.ts";

/**
 * The contract between the supervisor (which owns llama-server) and its users (the agent
 * loop, warm-up). Users never see processes, only a lease on a ready server: an endpoint
 * the llama/ client talks to.
 */
export interface LlamaLease extends LlamaEndpoint {
  /** Gives the slot back; call exactly once, in a finally. */
  release(): void;
  /** Tells the supervisor this server failed the request (crash, wedge) so it can restart. */
  reportFailure(reason: string): void;
  /**
   * Aborts when this server dies (crash, or restarted after a reportFailure); its reason is a
   * CoreError naming the crash. Combine it with the chat's own signal for the HTTP request.
   */
  died: AbortSignal;
  /**
   * llama.request_timeout_s in ms: a request that makes no progress for this long (no SSE event;
   * before the first token no byte, or only pings for EVENTLESS_CAP times this: llama/completion.ts
   * onProgress, onAlive) means the server is wedged; report it with reportFailure.
   * `watchProgress` does both.
   */
  requestTimeoutMs: number;
  /**
   * The server refused this lease's request (llama/errors.ts `ConnectionRefused`): it is gone,
   * though its exit may not have been seen yet. Counts it as the crash it is and resolves once
   * the lease points at a server that serves (`baseUrl`, `apiKey` and `died` follow it),
   * restarted within the restart budget; rejects as `acquire` does (over budget, a failed
   * start, `signal`). Also for a server that died before the lease's first request (`died`
   * aborted: a KV restore that killed it, 93f). `onProgress` hears the restart as `acquire`'s
   * does; a request sent again, its step begun, passes none. Optional: a stand-in provider in a
   * test may not have one.
   */
  reconnect?(signal: AbortSignal, onProgress?: (p: StartProgress) => void): Promise<void>;
  /**
   * The server the lease is on (runtime/launch.ts), read-only: its id and epoch, props, idle
   * sleep and slot use. It follows a `reconnect`.
   */
  readonly launch: LaunchView;
}

export interface AcquireOptions {
  /**
   * The host asked for this start itself (`warmup`): a restart goes ahead at once, without
   * back-off and even when the automatic restart budget is spent.
   */
  explicit?: boolean;
  /**
   * What `prestart()` gave this caller: a start it began that has failed since is this
   * caller's error, not a reason to try again.
   */
  prestarted?: StartTicket | undefined;
}

/** A handle on a start `prestart()` began. */
export interface StartTicket {
  /**
   * Settles once llama-server is spawned (or the start ended without it): what comes before
   * the spawn is the cold chat's critical path, so the turn lets it run first.
   */
  readonly spawned: Promise<void>;
}

export interface LlamaProvider {
  /**
   * Starts llama-server when needed, waits for a free slot, resolves with a lease. Rejects
   * with CoreError (binary_missing, model_missing, model_plan_error, internal_error) or, when
   * `signal` aborts first, with the signal's reason.
   */
  acquire(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<LlamaLease>;
  /**
   * Begins starting llama-server now when it is stopped, without waiting and without taking a
   * slot: a chat calls it on arrival, so the model loads while the turn is prepared (session,
   * memory, tools) and progress is heard through `acquire` as before. Undefined when nothing
   * was begun (already up, starting, or a restart, which keeps its back-off on acquire's path).
   */
  prestart?(): StartTicket | undefined;
  /**
   * A connection opened now to the serving llama-server for a chat's first request, when one is
   * ready and awake with a slot free for it (runtime/launch.ts `connectAhead`); no start, no
   * wait, no slot taken. Undefined otherwise, or where a provider has none.
   */
  connectAhead?(): SpareConnection | undefined;
  /**
   * Whether its serving llama-server reads images, as that server's /props already said; no
   * request made. Undefined when not known so (none serving, its /props not read yet).
   */
  readsImages?(): boolean | undefined;
  /** Parallel slots of the planned server: how many chats run at once. */
  slots(): number;
  /**
   * What the `status` method reports, read without touching llama-server (no HTTP, no config
   * load). Optional: a stand-in provider in a test may not have one.
   */
  snapshot?(): SupervisorSnapshot;
  stop(): Promise<void>;
}
