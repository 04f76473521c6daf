import type { FoundServer } from "../config/find-binary-asked.ts";
import type { LaunchPlan } from "../plan/launch-plan.ts";
import type { CoreError } from "../protocol/errors.ts";
import type { LoadModeProbe } from "./load-mode.ts";
import type { Spawner } from "./spawn.ts";

/** What a start tells the plan it asks for. */
export interface PlanHint {
  outOfMemory: number;
}

/** Timings and limits, from config.yaml's `llama` section (read at each start). */
export interface SupervisorSettings {
  startupTimeoutMs: number;
  stopGraceMs: number;
  /** Automatic restarts allowed within `restartWindowMs` (a rate, so the budget recovers). */
  maxRestarts: number;
  restartWindowMs: number;
  restartBackoffMs: number;
  requestTimeoutMs: number;
  logMaxBytes: number;
  logFiles: number;
}

/** A start that failed once spawned: what it launched (launcher.ts `launchKey`), its error, when. */
export interface StartFailure {
  key: string;
  error: CoreError;
  at: number;
}

/**
 * Until when (ms since the epoch) a failure holds a start of its launch (launcher.ts holdBack):
 * null when none is held, or its hold is over.
 */
export function startHeldUntil(f: StartFailure | undefined, holdMs: number, now: number): number | null {
  return f !== undefined && f.at + holdMs > now ? f.at + holdMs : null;
}

/** The last start failure of a model, read and written by its supervisor's launcher. */
export interface StartFailureSlot {
  get(): StartFailure | undefined;
  set(failure: StartFailure | undefined): void;
}

export interface SupervisorOptions {
  /** Where llama-server is; `tried` becomes binary_missing's data. */
  findBinary: () => FoundServer | Promise<FoundServer>;
  /**
   * The planner's launch plan; its argv is rendered at each spawn. `hint.outOfMemory`: starts of
   * this supervisor that ran out of memory with layers on a GPU (launcher.ts), for the plan to keep
   * more of it free (PlanConfig.gpu_out_of_memory).
   */
  plan: (hint: PlanHint) => Promise<LaunchPlan>;
  dataDir: () => string;
  /**
   * Which model this supervisor serves when the core runs several (docs/supervisor.md "Scheduling
   * several models"): its log and pid record are suffixed by it. Absent: the model section's,
   * under today's names.
   */
  instance?: string;
  /**
   * Where the last start that failed once spawned is kept for the hold (launcher.ts `holdBack`).
   * A model of several keeps it across its runtimes, which the scheduler makes anew for each load
   * after a failed one (server/model-runtime.ts). Absent: the supervisor's own.
   */
  startFailure?: StartFailureSlot;
  settings: () => SupervisorSettings;
  /**
   * A llama-server it spawned is gone: exited (a crash, a failed start, one planned again after
   * running out of GPU memory, a stop), or its memory given back while a stop waits for the exit.
   * Once per child. The core tells the shared probe (plan/probe-ahead.ts `changed`): one begun
   * while it held its memory would plan the next start short of layers.
   */
  onChildGone?: () => void;
  /** Slots before any plan exists (initialize may ask before the first start); never throws: `status` reads it. */
  fallbackSlots?: () => number;
  spawner?: Spawner;
  /** Whether a binary takes `--load-mode` (load-mode.ts); asks its `--help` when absent. */
  loadMode?: LoadModeProbe;
  pickPort?: () => Promise<number>;
  /** The environment the child's is built from. */
  env?: Record<string, string | undefined>;
  healthIntervalMs?: number;
  /** Port choices before a bind failure is final. */
  maxBindAttempts?: number;
  /** Reap leftovers of dead cores before the first start (tests turn it off). */
  reap?: boolean;
  /** The clock the restart budget's window runs on (ms since the epoch); tests move it. */
  now?: () => number;
}
