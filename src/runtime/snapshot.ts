import type { CoreError } from "../protocol/errors.ts";
import type { SleepPhase } from "./idle-sleep.ts";
import type { StateKind } from "./supervisor-state.ts";

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
  /** `--sleep-idle-seconds` of the last launch, in ms (0: never); null before any launch. */
  idleSleepMs: number | null;
  /** Of the last plan; null before any. */
  model: { path: string | null; name: string | null; bytes: number | null; contextPerSlot: number | null };
}
