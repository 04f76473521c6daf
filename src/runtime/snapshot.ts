import type { LaunchPlan } from "../plan/launch-plan.ts";
import type { CoreError } from "../protocol/errors.ts";
import type { SleepPhase } from "./idle-sleep.ts";
import { type StateKind, type SupervisorState, serving } from "./supervisor-state.ts";

/** What a status report needs of the supervisor, read without touching llama-server. */
export interface SupervisorSnapshot {
  state: StateKind;
  /** The child's pid once spawned (starting) or while it serves. */
  pid: number | null;
  /** Clock times (ms since the epoch) of the serving child's spawn and readiness. */
  startedAt: number | null;
  readyAt: number | null;
  /** Why the server is down: the last crash or failed start (while stopped). */
  lastError: CoreError | null;
  /** A crash or wedge happened; the next start is a restart. */
  restartPending: boolean;
  restarts: {
    /** Automatic restarts within the window ending now, of `max` (null: the config is unreadable). */
    used: number;
    max: number | null;
    windowMs: number | null;
    /** While a restart is pending and the budget is spent: when a chat may restart it again. */
    nextAutomaticTryAt: number | null;
  };
  slots: { busy: number; waiting: number; total: number };
  /** Idle sleep of the serving server, as learned from `/props` (awake when it cannot sleep). */
  sleep: SleepPhase;
  /** The last plan's idle sleep (`idle_sleep_s`, launched as `--sleep-idle-seconds`), in ms (0: never); null before any launch. */
  idleSleepMs: number | null;
  /**
   * Of the last plan; null before any. `thinking`: whether its chat template lets the model
   * think, as the serving server's /props said once a chat read it, else as the plan read it.
   */
  model: {
    path: string | null;
    name: string | null;
    bytes: number | null;
    contextPerSlot: number | null;
    thinking: boolean | null;
    /** Whether the last plan launched a vision projector with the model (`--mmproj`). */
    vision: boolean | null;
  };
  /** The last plan's RAM prompt cache (`--cache-ram`), in bytes; null before any launch. */
  cacheRamBytes: number | null;
  /** The last plan's layers on a GPU (`-ngl`); null before any launch. */
  gpuLayers: number | null;
  /** Starts that ran out of GPU memory and were planned again with more of it kept free (launcher.ts). */
  outOfMemoryStarts: number;
  /** Until when (ms since the epoch) a start of the launch that failed last is held (launcher.ts holdBack); null: none. */
  startHeldUntil: number | null;
}

/**
 * The snapshot of a state, the last plan, the slots' semaphore and the restart budget: plain
 * reads, never llama-server, never an error.
 */
export function snapshotOf(
  s: SupervisorState,
  launched: { plan: LaunchPlan | undefined; outOfMemoryStarts: number; startHeldUntil: number | null },
  slots: SupervisorSnapshot["slots"],
  restarts: SupervisorSnapshot["restarts"],
): SupervisorSnapshot {
  const { plan } = launched;
  const running = serving(s);
  const stopped = s.kind === "stopped" ? s : undefined;
  return {
    state: s.kind,
    pid: running?.child.pid ?? (s.kind === "starting" ? (s.pid ?? null) : null),
    startedAt: running?.startedAt ?? null,
    readyAt: running?.readyAt ?? null,
    // Down: why. Restarting (or a failed server being stopped): what it follows.
    lastError: stopped?.lastError ?? ("restartFor" in s ? (s.restartFor ?? null) : null),
    restartPending: "restartFor" in s && s.restartFor !== undefined,
    restarts,
    slots,
    sleep: s.kind === "ready" ? s.running.launch.sleepPhase : "awake",
    idleSleepMs: plan ? plan.idle_sleep_s * 1000 : null,
    model: {
      path: plan?.model_path ?? null,
      name: plan?.model_name ?? null,
      bytes: plan?.model_bytes ?? null,
      contextPerSlot: plan?.context_per_slot ?? null,
      thinking: running?.launch.thinking ?? plan?.thinking ?? null,
      vision: plan ? plan.mmproj != null : null,
    },
    cacheRamBytes: plan ? plan.cache_ram_mib * 1024 * 1024 : null,
    gpuLayers: plan?.gpu_layers ?? null,
    outOfMemoryStarts: launched.outOfMemoryStarts,
    startHeldUntil: launched.startHeldUntil,
  };
}
