import { type Ask, type DeviceBytes, decideFit, type HeldModel } from "./memory-fit.ts";
import type { ModelFootprint, SchedulerProgress, Timers } from "./model-runtime.ts";
import type { LoadJob } from "./model-state.ts";
import type { Room } from "./room.ts";
import { neverFits, noRoom, noSpareRoom } from "./scheduler-errors.ts";

/**
 * The longest a waiting load goes without deciding again. Not every freeing is told to the room:
 * a server failed by a reported wedge aborts its leases at once but holds its memory until its
 * stop ends (grace, then a kill), and nothing is released or aborted then.
 */
const LOOK_AGAIN_MS = 1_000;

const pinnedOf = (held: readonly HeldModel[]) => held.filter((m) => m.pinned).map((m) => m.name);

/** What admission asks of the scheduler. */
export interface AdmissionDeps {
  timers: Timers;
  room: Room;
  /** `llama.load_wait_s` in ms, read when the wait begins. */
  loadWaitMs: () => number;
  /** Every other model holding memory now. */
  held: (except: string) => HeldModel[];
  /**
   * Begins unloading these idle models at once (each leaves `loaded` before this returns, so
   * no other decision counts it as a candidate), then resolves once they have stopped.
   */
  evict: (models: readonly string[]) => Promise<void>;
  /** Loads admitted so far: a plan made across an admission is made again (model-load.ts). */
  admissions: { count: number };
}

/** When a load first waited (for others' loads or for room): `load_wait_s` bounds its waits together. */
export interface WaitStart {
  at?: number;
}

/**
 * Holds `job` until its model fits (docs/supervisor.md "Scheduling several models"): at once,
 * after unloading idle models least recently used first, or after waiting for room up to
 * `load_wait_s` (from `waited`, when it waited before). Marks the job admitted in the same step as the decision, so a second load
 * deciding meanwhile counts its bytes. Throws `model_plan_error` (never fits; waited too long,
 * naming the holders) or the signal's reason. While it waits for busy models' chats to end, later
 * requests for those models queue behind it (room.ts `want`): their stream cannot starve it.
 */
export async function admit(
  model: string,
  job: LoadJob,
  footprint: ModelFootprint,
  deps: AdmissionDeps,
  signal: AbortSignal,
  emit: (p: SchedulerProgress) => void,
  waited: WaitStart = {},
): Promise<void> {
  waited.at ??= deps.timers.now();
  const t0 = waited.at;
  const limitMs = deps.loadWaitMs();
  // However the wait ends, requests queued behind it (room.ts `behind`) decide again.
  try {
    for (;;) {
      signal.throwIfAborted();
      const held = deps.held(model);
      const d = decideFit(held, footprint.budget, { name: model, bytes: footprint.bytes });
      if (d.kind === "never") throw neverFits(model, d.devices);
      if (d.kind === "fits" || (d.kind === "evict" && !job.spare)) {
        job.admitted = true;
        deps.admissions.count += 1;
        deps.room.unwant(job);
        if (d.kind === "evict") await deps.evict(d.models);
        return;
      }
      const holders = d.kind === "evict" ? d.models : d.holders;
      // A spare load (model-state.ts) unloads nothing and waits for nothing: its caller goes on without it.
      if (job.spare) throw noSpareRoom(model, holders);
      const elapsed = () => deps.timers.now() - t0;
      const report = () => emit({ phase: "waiting_for_memory", models: holders, elapsed_ms: elapsed() });
      const left = limitMs - elapsed();
      if (left <= 0) throw noRoom(model, holders, pinnedOf(held), elapsed());
      deps.room.want(job, model, waitsOn(held, footprint.budget, { name: model, bytes: footprint.bytes }));
      report();
      await deps.room.wait(Math.min(left, LOOK_AGAIN_MS), signal, report);
    }
  } finally {
    deps.room.unwant(job);
  }
}

/**
 * The busy models whose chats `model`'s load waits to end: those it would unload were they idle.
 * None when a pinned model keeps it waiting anyway (queueing their chats would free nothing).
 */
function waitsOn(held: readonly HeldModel[], budget: DeviceBytes, ask: Ask): string[] {
  const idle = held.map((m) => (m.pinned ? m : { ...m, busy: false }));
  const d = decideFit(idle, budget, ask);
  if (d.kind !== "evict") return [];
  return d.models.filter((name) => held.some((m) => m.name === name && m.busy));
}
