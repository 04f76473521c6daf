import type { AcquireOptions, LlamaProvider, StartTicket } from "./endpoint.ts";
import type { DeviceBytes } from "./memory-fit.ts";
import type { SupervisorSnapshot } from "./snapshot.ts";
import type { StartProgress } from "./start-progress.ts";

/**
 * What the scheduler (scheduler.ts) owns per loaded model: a supervisor-like provider of one
 * llama-server (runtime/endpoint.ts), with what its plan holds and a last save before it stops.
 */
export interface ModelRuntime extends LlamaProvider {
  prestart(): StartTicket | undefined;
  /**
   * Starts its llama-server when needed and resolves once it is ready, taking no slot: the
   * scheduler's load, which hands the server to the chat that asked for it, whose `acquire` then
   * takes the lease (and makes the one look before a lease: docs/performance.md "The swap, fourth pass").
   * Resolves with a signal that aborts as that server ends (a crash, a stop), when it has one.
   */
  ready(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<AbortSignal | undefined>;
  snapshot(): SupervisorSnapshot;
  /** A warmup joined its load: the start under way, if any, is the host's (supervisor.ts `asked`). */
  asked?(): void;
  /**
   * The model's plan, made as if it were the only model loaded (docs/models.md "Several models": a model never
   * gets a smaller context because another is loaded): per device its `usage.total`, and each
   * device's `budget_bytes` as this machine has it with none of the core's models loaded.
   * Rejects as the plan does (`model_plan_error` when it cannot fit even alone, `model_missing`).
   */
  plannedBytes(): Promise<ModelFootprint>;
  /**
   * Throws the error a start of its last `plannedBytes` plan would be refused with now (a start
   * that failed of late, held: launcher.ts checkHold), before the scheduler makes room for it.
   */
  checkHold?(explicit: boolean): Promise<void>;
  /**
   * What the plan of its server running now holds per device, once one was made: after a start
   * that ran out of GPU memory the replan's (fewer GPU bytes, more RAM), not the plan admitted.
   */
  heldBytes?(): DeviceBytes | undefined;
  /**
   * Called before `stop()` when the scheduler unloads the model: the KV state of its sessions
   * in slots is saved, so a later chat that brings it back re-processes nothing
   * (docs/agent.md#prompt-reuse). Resolves once llama-server has written the files; the core's
   * own part of them waits for `stopped` (the stop's end). Never throws for a failed save.
   */
  beforeUnload(stopped?: Promise<void>): Promise<void>;
  /**
   * Stops its llama-server. `untilReleased`: returns once the server has given its memory back,
   * which may be a few ms before its exit is reported (supervisor.ts `stop`): the scheduler's
   * unload to make room, whose next load waits for that memory alone.
   */
  stop(options?: StopOptions): Promise<void>;
}

export interface StopOptions {
  untilReleased?: boolean;
}

export interface ModelFootprint {
  /** Planned bytes per device (the plan's devices' `usage.total`; an RPC device's whole budget). */
  bytes: DeviceBytes;
  /** Each device's budget (`budget_bytes`); RPC devices by their plan id. */
  budget: DeviceBytes;
}

/**
 * What a caller hears while it waits for a model: a start's progress, or room being made. It goes
 * out as `warmup_progress` unchanged, so its fields are the protocol's (`models` names the holders).
 */
export type SchedulerProgress =
  | StartProgress
  | { phase: "waiting_for_memory"; models: string[]; elapsed_ms: number };

/** The scheduler's timers, injected so tests move time by hand. */
export interface Timers {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const realTimers: Timers = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    // An idle-unload timer never keeps the process alive on its own.
    (t as { unref?: () => void }).unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** From config.yaml's `llama` section, read at each use (the config may load after the scheduler). */
export interface SchedulerSettings {
  /** `llama.load_wait_s` in ms: how long a load waits for room before `model_plan_error`. */
  loadWaitMs: number;
  /** `llama.idle_unload_s` in ms; 0: never. */
  idleUnloadMs: number;
}

export interface SchedulerOptions {
  /** Makes the runtime of one model by name; throws (`invalid_request`) for a name it does not know. */
  runtime: (model: string) => ModelRuntime;
  settings: () => SchedulerSettings;
  /** The configured models (status lists each, `unloaded` when not running) and their `pin`. */
  configured: () => readonly { name: string; pinned: boolean }[];
  /** Ends the chats on `model` as `cancelled` (a forced unload). */
  cancelChats: (model: string) => void;
  /**
   * Awaited by every load before its plan: a rejection fails the load with its error (the
   * pinned set over the budget, docs/models.md "Several models"). The caller memoizes it.
   */
  beforeLoad?: () => Promise<void>;
  timers?: Timers;
}
