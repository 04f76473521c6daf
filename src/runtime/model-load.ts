import { cancelledError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import { logUnexpected } from "../util/logger.ts";
import type { StateCell } from "../util/state-cell.ts";
import { type AdmissionDeps, admit, type WaitStart } from "./admission.ts";
import type { ModelFootprint, ModelRuntime, SchedulerProgress } from "./model-runtime.ts";
import type { Live, LoadJob, ModelState } from "./model-state.ts";
import type { Room } from "./room.ts";
import { gaveUpWaiting, stillLoading, unloadedWhileWaiting } from "./scheduler-errors.ts";

/** The model a load is for, as the scheduler keeps it (scheduler.ts). */
export interface LoadTarget {
  name: string;
  cell: StateCell<ModelState>;
}

/** What a load asks of the scheduler. */
export interface LoadDeps<T extends LoadTarget = LoadTarget> {
  /** Makes the model's runtime; throws for a name it does not know. */
  runtime(model: string): ModelRuntime;
  beforeLoad?: () => Promise<void>;
  admission: AdmissionDeps;
  room: Room;
  /** Each device's budget as the latest plan saw it: a load's plan updates it. */
  budget: Record<string, number>;
  /** The load ended `loaded` (its idle timer is armed). */
  loaded(t: T): void;
  /** Other models' loads admitted and still starting: their memory is held but not yet taken. */
  underWay(except: string): { name: string; done: Promise<unknown> }[];
}

/**
 * unloaded | failed → loading: the runtime is made now, so an unknown name fails its caller alone;
 * a dead server's, kept in `failed`, is started again (its restart budget applies).
 */
export function startLoad<T extends LoadTarget>(
  t: T,
  from: Extract<ModelState, { kind: "unloaded" | "failed" }>,
  deps: LoadDeps<T>,
  spare = false,
): LoadJob {
  const runtime = from.kind === "failed" && from.runtime ? from.runtime : deps.runtime(t.name);
  const done = Promise.withResolvers<Live>();
  done.promise.catch(() => {}); // its callers hear it
  const job: LoadJob = {
    abort: new AbortController(),
    done: done.promise,
    listeners: new Set(),
    waiting: 0,
    explicit: false,
    spare,
    runtime,
    restart: from.kind === "failed" && from.runtime === runtime,
    admitted: false,
    started: Promise.withResolvers<void>(),
  };
  const st = { kind: "loading" as const, job };
  t.cell.swap(from, st);
  runLoad(t, st, from, deps).then(done.resolve, done.reject);
  return job;
}

/** Waits on a shared load; the last caller to leave before it was admitted ends it. */
export async function joinLoad(
  job: LoadJob,
  signal: AbortSignal,
  onProgress: ((p: SchedulerProgress) => void) | undefined,
  explicit: boolean,
): Promise<Live> {
  if (explicit) {
    job.explicit = true;
    // A chat's load may be in its runtime's start already, which read the flag as it began.
    job.runtime?.asked?.();
  }
  if (onProgress) job.listeners.add(onProgress);
  job.waiting += 1;
  try {
    return await abortable(job.done, signal);
  } finally {
    if (onProgress) job.listeners.delete(onProgress);
    job.waiting -= 1;
    dropIfUnwanted(job);
  }
}

/**
 * Ends a load nobody waits for any more, before it was admitted: not one a `models.load` (or a
 * warmup) asked for. Also the scheduler's when the last chat on the model ends without having
 * joined the load its arrival began (scheduler.ts `prestart`).
 */
export function dropIfUnwanted(job: LoadJob): void {
  if (job.waiting === 0 && !job.explicit && !job.admitted)
    job.abort.abort(cancelledError("no request waits for it"));
}

/**
 * A plan made while another model's admitted load is starting would see that model's memory free
 * on the device (not yet taken) and add it back as held by others: counted twice, the budget is
 * too large and two models that do not fit together are both let in (a helper's hostile review).
 * So a load plans once those loads have ended, loaded or not; it hears `waiting_for_memory`.
 */
async function afterLoadsUnderWay(
  name: string,
  deps: LoadDeps,
  signal: AbortSignal,
  emit: (p: SchedulerProgress) => void,
  waited: WaitStart,
): Promise<void> {
  if (deps.underWay(name).length === 0) return;
  // The load's callers join it right after it begins, in the same turn: they hear the first report.
  await Promise.resolve();
  const { timers } = deps.admission;
  waited.at ??= timers.now();
  const t0 = waited.at;
  const limitMs = deps.admission.loadWaitMs();
  for (let loads = deps.underWay(name); loads.length > 0; loads = deps.underWay(name)) {
    const holders = loads.map((l) => l.name);
    // A start may take minutes (a large model, a slow disk): the wait is bounded as one for room is.
    const left = limitMs - (timers.now() - t0);
    if (left <= 0) throw stillLoading(name, holders, timers.now() - t0);
    const report = () =>
      emit({ phase: "waiting_for_memory", models: holders, elapsed_ms: timers.now() - t0 });
    report();
    // A load's end, loaded or failed, notifies the room; the look again each second is a backstop.
    await deps.room.wait(Math.min(left, 1_000), signal, report);
  }
}

/**
 * The model's plan, made with no admitted load of another model under way. One admitted while it
 * was being made (loads not yet admitted plan side by side) may have been free on the device when
 * the plan read it and then added back as held: counted twice, so the plan is made again.
 */
async function planAlone(
  name: string,
  runtime: ModelRuntime,
  deps: LoadDeps,
  signal: AbortSignal,
  emit: (p: SchedulerProgress) => void,
  waited: WaitStart,
): Promise<ModelFootprint> {
  for (;;) {
    await afterLoadsUnderWay(name, deps, signal, emit, waited);
    const before = deps.admission.admissions.count;
    const footprint = await abortable(runtime.plannedBytes(), signal);
    if (deps.admission.admissions.count === before) return footprint;
  }
}

/** A load's work: the plan's bytes, admission (room made or waited for), the start, ready. */
async function runLoad<T extends LoadTarget>(
  t: T,
  st: Extract<ModelState, { kind: "loading" }>,
  from: Extract<ModelState, { kind: "unloaded" | "failed" }>,
  deps: LoadDeps<T>,
): Promise<Live> {
  const { job } = st;
  const runtime = job.runtime as NonNullable<LoadJob["runtime"]>;
  const signal = job.abort.signal;
  const emit = (p: SchedulerProgress) => {
    for (const l of job.listeners) l(p);
  };
  try {
    if (deps.beforeLoad) await abortable(deps.beforeLoad(), signal);
    const waited: WaitStart = {};
    const footprint = await planAlone(t.name, runtime, deps, signal, emit, waited);
    Object.assign(deps.budget, footprint.budget);
    job.bytes = footprint.bytes;
    // A start held after a failure is refused before any idle model is unloaded to make room for
    // it; unless a warmup or models.load joined while the hold was checked: the host asked, as at launch.
    await abortable(runtime.checkHold?.(job.explicit) ?? Promise.resolve(), signal).catch((err) => {
      if (signal.aborted || !job.explicit) throw err;
    });
    await admit(t.name, job, footprint, deps.admission, signal, emit, waited);
    // Ended while the room was made (shutdown, a forced unload): nothing is started for it.
    signal.throwIfAborted();
    job.started.resolve();
    const died = await runtime.ready(signal, emit, { explicit: job.explicit });
    const live: Live = { runtime, bytes: footprint.bytes };
    if (!t.cell.swap(st, { kind: "loaded", live })) throw unloadedWhileWaiting(t.name);
    // Its server's death frees its memory once no lease is out (scheduler.ts `settle`): waiters decide again.
    died?.addEventListener("abort", () => deps.room.notify(), { once: true });
    deps.loaded(t);
    // Loads that waited for this one to take its memory plan now (`afterLoadsUnderWay`).
    deps.room.notify();
    return live;
  } catch (err) {
    job.started.resolve();
    // Still this load's to end (stop() or an unload took it over otherwise, and stops the runtime).
    if (t.cell.get() === st) {
      // A dead server's restart that failed (its budget spent, say) keeps its runtime for the next try.
      const keep = job.restart;
      // One that gave up waiting for memory, or was dropped before admission (aborted with the cell
      // still ours: nobody waits), started nothing: the model is what it was before (a dead
      // server's, its crash and runtime, so its restart budget), not `failed`, which status keeps
      // for a crash or a failed start; the refusal is its callers'.
      const back = gaveUpWaiting(err) || signal.aborted;
      t.cell.swap(st, back ? { ...from } : { kind: "failed", error: err, ...(keep ? { runtime } : {}) });
      if (!keep)
        await runtime.stop().catch((stopErr) => logUnexpected(`stopping model ${t.name} failed`, stopErr));
      deps.room.notify();
    }
    throw err;
  }
}
