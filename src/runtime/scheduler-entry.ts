import { CoreError, cancelledError } from "../protocol/errors.ts";
import { abortable } from "../util/abortable.ts";
import type { StateCell } from "../util/state-cell.ts";
import type { DeviceBytes, HeldModel } from "./memory-fit.ts";
import type { SchedulerProgress, Timers } from "./model-runtime.ts";
import { heldBy, type Live, type ModelState, modelCell } from "./model-state.ts";
import { schedulerClosed, unloadedWhileWaiting } from "./scheduler-errors.ts";

/** One model the scheduler knows: its state and what is asked of it. */
export interface Entry {
  name: string;
  cell: StateCell<ModelState>;
  /** Chats holding a lease on it or waiting for one: busy while above 0. */
  users: number;
  /** Chats (and embeds) on it from their request to their end (`claim`): busy while above 0 too. */
  claims: number;
  /** Those in its runtime's acquire or holding its lease: a server that dies under them is theirs to restart. */
  leases: number;
  lastUsedAt: number | null;
  /** `models.load`'s pin, over the config's. */
  pin: boolean | undefined;
  /** The pin before the `models.load` calls in flight (`pinLoads`), for them to give back if it fails. */
  pinBefore: boolean | undefined;
  pinLoads: number;
  /** Bumped as `models.unload` drops the pin: loads from before it settle nothing after. */
  pinEra: number;
  idleTimer: unknown;
}

export function newEntry(name: string): Entry {
  return {
    name,
    cell: modelCell(name),
    users: 0,
    claims: 0,
    leases: 0,
    lastUsedAt: null,
    pin: undefined,
    pinBefore: undefined,
    pinLoads: 0,
    pinEra: 0,
    idleTimer: undefined,
  };
}

/**
 * `models.load`'s pin, set as its load begins (the model is never unloaded for room between the
 * load's end and its caller's turn) and given back once the load failed (`failed: true`) to what it
 * was before the first of the loads in flight: loads at once share one failure, so a failed load
 * pins nothing, whichever of them asked. One that succeeded told its caller the pin holds: it is
 * what a load still in flight gives back to, should that one fail later (its server died again).
 * Idempotent.
 */
export function askPin(e: Entry, pin: boolean | undefined): (failed: boolean) => void {
  if (e.pinLoads++ === 0) e.pinBefore = e.pin;
  if (pin !== undefined) e.pin = pin;
  const era = e.pinEra;
  let ended = false;
  return (failed) => {
    if (ended || e.pinEra !== era) return;
    ended = true;
    e.pinLoads -= 1;
    if (failed) e.pin = e.pinBefore;
    else if (pin !== undefined) e.pinBefore = pin;
  };
}

/**
 * `models.unload` (or a failed model cleared): the host let the model go, so a pin `models.load`
 * gave ends (the config's applies again). A load from before, ending only after the unload stopped
 * its runtime, gives nothing back: the pin is a load's asked since, or none.
 */
export function dropPin(e: Entry): void {
  e.pin = e.pinBefore = undefined;
  e.pinLoads = 0;
  e.pinEra += 1;
}

/**
 * The wait for an unload under way (idle, for room) before a load begins again: a `models.unload`
 * that came meanwhile (`dropPin`) cancels it, as it cancels a load it finds under way, so a
 * `models.load` asked before that unload answered does not bring the model back after it.
 */
export async function unloadedFor(e: Entry, done: Promise<void>, signal: AbortSignal): Promise<void> {
  const era = e.pinEra;
  await abortable(done, signal);
  if (e.pinEra !== era) throw cancelledError(`model "${e.name}" was unloaded`);
}

/**
 * The pin of a `models.load` whose load failed or whose wait was cancelled (`askPin`'s end): a
 * failed load pins nothing; a cancelled one goes on, pinned once loaded, and nothing if it fails.
 */
export function pinAfterLoad(e: Entry, pinned: (failed: boolean) => void, cancelled: boolean): void {
  const now = e.cell.get();
  if (now.kind === "loading")
    now.job.done.then(
      () => pinned(false),
      () => pinned(true),
    );
  else pinned(now.kind !== "loaded" || !cancelled);
}

/** Whether a chat holds, waits for or has asked for the model. */
export const busy = (e: Entry) => e.users > 0 || e.claims > 0;

/** The chats on it: each claimed chat also acquires within its claim, so the larger count is theirs. */
export const chats = (e: Entry) => Math.max(e.users, e.claims);

/**
 * A loaded model whose llama-server died and is not restarting (no lease is out, whose
 * reconnect would restart it) becomes `failed` here, as any reader looks: it holds no memory
 * any more, and its runtime is kept for the next load to start again (model-state.ts).
 */
export function settleDead(e: Entry, timers: Timers): ModelState {
  const s = e.cell.get();
  if (s.kind !== "loaded" || e.leases > 0) return s;
  const snap = s.live.runtime.snapshot();
  if (snap.state !== "stopped") return s;
  const failed: ModelState = {
    kind: "failed",
    error: snap.lastError ?? new CoreError("internal_error", `model "${e.name}"'s llama-server stopped`),
    runtime: s.live.runtime,
  };
  e.cell.swap(s, failed);
  timers.clearTimeout(e.idleTimer);
  return failed;
}

/** Loads admitted and still starting, but `except`'s: their memory is held but not yet taken. */
export function loadsUnderWay(
  entries: Iterable<Entry>,
  except: string,
): { name: string; done: Promise<unknown> }[] {
  const out: { name: string; done: Promise<unknown> }[] = [];
  for (const e of entries) {
    const s = e.cell.get();
    if (e.name !== except && s.kind === "loading" && s.job.admitted)
      out.push({ name: e.name, done: s.job.done });
  }
  return out;
}

/** Every model but `except` that holds memory now, as admission's decision sees it. */
export function heldModels(
  entries: Iterable<Entry>,
  except: string,
  timers: Timers,
  pinned: (e: Entry) => boolean,
): HeldModel[] {
  const out: HeldModel[] = [];
  for (const e of entries) {
    const s = settleDead(e, timers);
    const bytes: DeviceBytes | undefined = heldBy(s);
    if (e.name === except || !bytes) continue;
    out.push({
      name: e.name,
      bytes,
      // A chat's claim alone does not keep it (only `unload` honours claims): a chat claimed on
      // it may be waiting for its session, held by a chat that needs this room (a cycle).
      busy: e.users > 0 || s.kind !== "loaded",
      pinned: pinned(e),
      lastUsedAt: e.lastUsedAt ?? 0,
    });
  }
  return out;
}

/**
 * `models.load`'s wait for a loaded model's server, which may be down (a chat restarting it, in a
 * back-off): the host's ask, as a warmup's. The restart goes on past a cancel (the wait stops, the
 * load goes on), and its end, not the wait's, settles the pin (`askPin`): a cancelled load whose
 * restart then fails pins nothing. An unload meanwhile stops the runtime, which tells its
 * waiters the core is shutting down: the load is told what happened instead, the unload, or the
 * shutdown (`closing`) as a joined load is told it.
 */
export async function whenServing(
  e: Entry,
  live: Live,
  signal: AbortSignal,
  onProgress: ((p: SchedulerProgress) => void) | undefined,
  closing: () => boolean,
  pinned: (failed: boolean) => void,
): Promise<void> {
  const serving = live.runtime.ready(
    new AbortController().signal,
    (p) => {
      if (!signal.aborted) onProgress?.(p);
    },
    { explicit: true },
  );
  serving.then(
    () => pinned(false),
    () => pinned(true),
  );
  try {
    await abortable(serving, signal);
  } catch (err) {
    // Only an unload changes the answer: a model seen `failed` meanwhile (its restart's server
    // dead, a status read) is told the restart's own error.
    const kind = e.cell.get().kind;
    if ((kind !== "unloading" && kind !== "unloaded") || signal.aborted) throw err;
    throw closing() ? schedulerClosed() : unloadedWhileWaiting(e.name);
  }
}
