import { StateCell, type Transitions } from "../util/state-cell.ts";
import type { DeviceBytes } from "./memory-fit.ts";
import type { ModelRuntime, SchedulerProgress } from "./model-runtime.ts";

/** One load of a model: its runtime and what its plan holds, from admission until it stops. */
export interface Live {
  runtime: ModelRuntime;
  bytes: DeviceBytes;
}

/** A load in progress, shared by every caller asking for the model meanwhile. */
export interface LoadJob {
  /** Aborted by stop(), by a forced unload, or when every caller waiting on it left before it was admitted. */
  abort: AbortController;
  done: Promise<Live>;
  listeners: Set<(p: SchedulerProgress) => void>;
  /** Callers waiting on it; a `models.load` keeps it going alone. */
  waiting: number;
  explicit: boolean;
  /**
   * Begun by a spare ask (recall's query vector): it takes free room only, unloading nothing for
   * it and waiting for none (`noSpareRoom`); an ordinary caller joining it before its admission
   * makes it an ordinary load (scheduler.ts `ready`).
   */
  spare: boolean;
  /** Its runtime and planned bytes once made, and whether it was admitted (then its bytes count as held). */
  runtime?: ModelRuntime;
  /** Its runtime is a dead server's, kept (see `failed`): a failure keeps it again rather than stop it. */
  restart: boolean;
  bytes?: DeviceBytes;
  admitted: boolean;
  /** Settles once it was admitted (its start begins then) or ended: a prestart's ticket. */
  started: PromiseWithResolvers<void>;
}

/**
 * A model's one state in the scheduler (docs/supervisor.md "Scheduling several models").
 * unloaded → loading (an acquire or a load) → loaded → unloading → unloaded; a load that fails
 * → failed, which the next acquire loads again (one that gave up waiting for memory, or was dropped
 * before admission, goes back to the state it began from); loading → unloading when stop() or a forced
 * unload ends it; loaded → failed when its llama-server died and no lease is out to restart it. A state object is replaced on every transition, so a job that lost a race
 * finds out by identity (util/state-cell.ts).
 */
export type ModelState =
  | { kind: "unloaded" }
  | { kind: "loading"; job: LoadJob }
  | { kind: "loaded"; live: Live }
  /**
   * Its bytes stay held until its llama-server has stopped; its runtime is still there meanwhile,
   * since the KV save before the stop asks it (its prompt reuse reads the provider's snapshot).
   */
  | {
      kind: "unloading";
      bytes: DeviceBytes | undefined;
      runtime: ModelRuntime | undefined;
      done: Promise<void>;
    }
  /**
   * `runtime`: a loaded model's whose llama-server died, kept stopped (not closed) so that the
   * next load starts that same supervisor again, within its restart budget. It holds no memory.
   */
  | { kind: "failed"; error: unknown; runtime?: ModelRuntime };

export type ModelStateKind = ModelState["kind"];

const TRANSITIONS: Transitions<ModelStateKind> = {
  unloaded: ["loading"],
  loading: ["loaded", "failed", "unloaded", "unloading"],
  loaded: ["unloading", "failed"],
  unloading: ["unloaded"],
  failed: ["loading", "unloaded"],
};

export function modelCell(name: string): StateCell<ModelState> {
  return new StateCell(`model ${name}`, TRANSITIONS, { kind: "unloaded" });
}

/**
 * What a state holds of the memory budget: a load once admitted, a loaded model, one still
 * stopping. A server planned again since (ran out of GPU memory at start) holds its replan's.
 */
export function heldBy(s: ModelState): DeviceBytes | undefined {
  if (s.kind === "loaded") return s.live.runtime.heldBytes?.() ?? s.live.bytes;
  if (s.kind === "unloading") return s.bytes;
  if (s.kind === "loading" && s.job.admitted) return s.job.runtime?.heldBytes?.() ?? s.job.bytes;
  return undefined;
}
