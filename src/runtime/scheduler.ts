import { cancelledError } from "../protocol/errors.ts";
import { logUnexpected } from "../util/logger.ts";
import type { AcquireOptions, StartTicket } from "./endpoint.ts";
import type { DeviceBytes, HeldModel } from "./memory-fit.ts";
import { type ModelLease, modelLease } from "./model-lease.ts";
import { dropIfUnwanted, joinLoad, type LoadDeps, startLoad } from "./model-load.ts";
import {
  type ModelRuntime,
  realTimers,
  type SchedulerOptions,
  type SchedulerProgress,
  type Timers,
} from "./model-runtime.ts";
import type { Live, ModelState } from "./model-state.ts";
import { beginUnload } from "./model-unload.ts";
import { Room } from "./room.ts";
import {
  askPin,
  busy,
  chats,
  dropPin,
  type Entry,
  heldModels,
  loadsUnderWay,
  newEntry,
  pinAfterLoad,
  settleDead,
  unloadedFor,
  whenServing,
} from "./scheduler-entry.ts";
import { modelBusy, notLoaded, schedulerClosed } from "./scheduler-errors.ts";
import { memoryRows, modelRow, type SchedulerSnapshot } from "./scheduler-snapshot.ts";

type Progress = ((p: SchedulerProgress) => void) | undefined;
type Unloadable = Extract<ModelState, { kind: "loaded" | "loading" }>;
const never = new AbortController().signal;

/**
 * Several models, each with a llama-server of its own, loaded as chats ask for them and kept
 * while memory allows (docs/supervisor.md "Scheduling several models"). What
 * fits is decided by the models' plans (memory-fit.ts), never by count; each model's state
 * (model-state.ts) changes only through its cell's guarded swap.
 */
export class Scheduler {
  private readonly entries = new Map<string, Entry>();
  private readonly timers: Timers;
  private readonly room: Room;
  /** Each device's budget as the latest plan saw it. */
  private readonly budget: Record<string, number> = {};
  private closing: Promise<void> | undefined;
  private readonly loads: LoadDeps<Entry>;

  constructor(private readonly options: SchedulerOptions) {
    this.timers = options.timers ?? realTimers;
    this.room = new Room(this.timers);
    this.loads = {
      runtime: (name) => options.runtime(name),
      ...(options.beforeLoad ? { beforeLoad: options.beforeLoad } : {}),
      admission: {
        timers: this.timers,
        room: this.room,
        loadWaitMs: () => options.settings().loadWaitMs,
        held: (except) => this.held(except),
        evict: (models) => this.evict(models),
        admissions: { count: 0 },
      },
      room: this.room,
      budget: this.budget,
      loaded: (e) => this.armIdle(e),
      underWay: (except) => loadsUnderWay(this.entries.values(), except),
    };
  }

  /**
   * A lease on `model`'s llama-server, loading the model first when needed (sharing a load in
   * progress, making room or waiting for it). The model counts as busy from this call until
   * the lease is released. Rejects as the model's runtime does, with `model_plan_error` when it
   * cannot fit, `cancelled` at shutdown or a forced unload, or the signal's reason. `spare`: an
   * ask its caller gives up on soon (recall's query vector): its load unloads no model to make
   * room and waits for none (refused `noSpareRoom`), so a chat's recall does not unload the chat's
   * own model (docs/supervisor.md "What is unloaded, when").
   */
  async acquire(
    model: string,
    signal: AbortSignal,
    onProgress?: (p: SchedulerProgress) => void,
    { spare = false, ...options }: AcquireOptions & { spare?: boolean } = {},
  ): Promise<ModelLease> {
    if (this.closing) throw schedulerClosed();
    // Behind loads waiting for this model's chats to end (room.ts `behind`); a spare ask is brief.
    // With none, nothing yields: the model is busy from this call on.
    if (!spare && this.room.ahead(model).length > 0) {
      await this.room.behind(model, () => this.loaded(model) !== undefined, signal, onProgress);
      if (this.closing) throw schedulerClosed();
    }
    const entry = this.entry(model);
    this.use(entry, 1);
    try {
      // A warmup's (explicit) load is the host's own, as models.load's: it restarts a dead server
      // whatever the restart budget, and its cancel ends the wait, not the load.
      const live = await this.ready(entry, signal, onProgress, options.explicit === true, spare);
      entry.leases += 1;
      try {
        const lease = await live.runtime.acquire(signal, onProgress, options);
        return modelLease(model, lease, () => {
          entry.leases -= 1;
          this.use(entry, -1);
        });
      } catch (err) {
        entry.leases -= 1;
        throw err;
      }
    } catch (err) {
      this.use(entry, -1);
      throw err;
    }
  }

  /**
   * A chat's load begun on its arrival, so the turn prepares while the model loads, as with one
   * model (run-turn.ts; docs/performance.md "Several models"): an unloaded model's load, which
   * the chat's acquire joins. Like a supervisor's prestart, a chat that fails before it asks
   * leaves the model loading once its load was admitted; one still deciding or waiting for room
   * is dropped when the model's last chat ends (`use`), as when a joined caller gives up.
   */
  prestart(model: string): StartTicket | undefined {
    const e = this.closing ? undefined : this.entry(model);
    const s = e?.cell.get();
    if (!e || s?.kind !== "unloaded") return undefined;
    try {
      return { spawned: startLoad(e, s, this.loads).started.promise };
    } catch {
      return undefined; // an unknown name: the chat's acquire hears why
    }
  }

  /**
   * A chat (or embed) on `model` from its request on, taken before anything that can yield: it
   * counts as the model's user while its turn prepares, before its acquire, so an unload (no
   * force) is refused and no swap picks the model meanwhile. The returned release is idempotent.
   */
  claim(model: string): () => void {
    const entry = this.entry(model);
    this.use(entry, 1, "claims");
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.use(entry, -1, "claims");
    };
  }

  /** `models.load`: loads `model` with no chat waiting, pinned when asked. */
  async load(
    model: string,
    opts: { pin?: boolean; signal?: AbortSignal; onProgress?: (p: SchedulerProgress) => void } = {},
  ): Promise<{ model: string; state: "loaded"; memory_bytes: number }> {
    if (this.closing) throw schedulerClosed();
    const entry = this.entry(model);
    const pinned = askPin(entry, opts.pin);
    // The host asked for it (a picker's preload): a use, or the model it just loaded, never used
    // by a chat, would be the first unloaded to make room, before models idle for hours.
    entry.lastUsedAt = this.timers.now();
    let live: Live;
    try {
      live = await this.ready(entry, opts.signal ?? never, opts.onProgress, true);
    } catch (err) {
      pinAfterLoad(entry, pinned, opts.signal?.aborted === true);
      this.forget(entry);
      throw err;
    }
    try {
      // A loaded model's server, maybe restarting: its end decides the pin, a cancel's too.
      await whenServing(entry, live, opts.signal ?? never, opts.onProgress, () => !!this.closing, pinned);
    } catch (err) {
      this.forget(entry);
      throw err;
    }
    entry.lastUsedAt = this.timers.now();
    this.armIdle(entry);
    return { model, state: "loaded", memory_bytes: Object.values(live.bytes).reduce((a, b) => a + b, 0) };
  }

  /**
   * `models.unload`: stops `model`'s llama-server after saving its sessions' KV state. Refused
   * (`model_busy`) while a chat runs on it or waits for it, unless `force`: then those chats
   * end `cancelled`. A failed model is cleared (`unloaded`; a path's row goes). An unknown
   * model, or one not loaded, is an `invalid_request`. `keepPin`: the core's own restart (memory's
   * embedder on a changed file), not the host's unload: its pin and its loads waiting stand.
   */
  async unload(model: string, opts: { force?: boolean; keepPin?: boolean } = {}): Promise<void> {
    const entry = this.entries.get(model);
    const s = entry && settleDead(entry, this.timers);
    if (!entry || !s || s.kind === "unloaded") {
      throw notLoaded(model, entry !== undefined || this.configuredPin(model) !== undefined);
    }
    // First: a chat on a failed model, or waiting for an unload under way, loads it again after.
    if (busy(entry)) {
      if (!opts.force) throw modelBusy(model, chats(entry));
      this.options.cancelChats(model);
    }
    if (s.kind === "failed") {
      if (!opts.keepPin) dropPin(entry);
      entry.cell.swap(s, { kind: "unloaded" });
      await s.runtime?.stop().catch((err) => logUnexpected(`stopping model ${model} failed`, err));
      this.forget(entry);
      return;
    }
    // The host let it go, also during an idle or for-room unload: a pin models.load gave ends (the
    // config's applies again) and a load waiting from before is cancelled (`unloadedFor`).
    if (!opts.keepPin) dropPin(entry);
    if (s.kind === "unloading") return s.done;
    return this.beginUnload(entry, s, cancelledError(`model "${model}" was unloaded`), true);
  }

  /**
   * Shutdown: loads refused and those under way ended at once, not left to make room and spawn
   * llama-server during `before` (the last saves); every model stopped once those are done.
   */
  stop(before?: () => Promise<unknown>): Promise<void> {
    this.closing ??= (async () => {
      for (const e of this.entries.values()) {
        const s = e.cell.get();
        if (s.kind === "loading") void this.beginUnload(e, s, schedulerClosed(), false);
      }
      await before?.();
      const stops = [...this.entries.values()].map((e) => {
        this.timers.clearTimeout(e.idleTimer);
        const s = e.cell.get();
        if (s.kind === "unloading") return s.done;
        // The core's prompt reuse saved every session as it stopped, before this (services.ts).
        if (s.kind === "loaded" || s.kind === "loading")
          return this.beginUnload(e, s, schedulerClosed(), false);
        // A dead server's runtime, kept for its restart, is closed.
        if (s.kind === "failed") return s.runtime?.stop().catch(() => {}) ?? Promise.resolve();
        return Promise.resolve();
      });
      await Promise.all(stops);
      this.room.notify();
    })();
    return this.closing;
  }

  /** What `status` shows: every configured model and any other known, and memory per device. */
  snapshot(): SchedulerSnapshot {
    // Dead servers seen as failed first; a path's failed row, with no chat on it, goes then.
    for (const e of [...this.entries.values()]) {
      settleDead(e, this.timers);
      this.forget(e);
    }
    const names = new Set([...this.options.configured().map((m) => m.name), ...this.entries.keys()]);
    const models = [...names].map((name) => {
      const e = this.entries.get(name);
      return modelRow({
        name,
        state: e?.cell.get() ?? { kind: "unloaded" },
        pinned: e ? this.pinned(e) : this.configuredPin(name) === true,
        chats: e ? chats(e) : 0,
        lastUsedAt: e?.lastUsedAt ?? null,
      });
    });
    const states = [...this.entries.values()].map((e) => e.cell.get());
    return { models, memory: memoryRows(states, this.budget) };
  }

  /** The model's runtime once loaded, for the methods that ask it directly (slots, snapshot). */
  loaded(model: string): Live | undefined {
    const e = this.entries.get(model);
    const s = e && settleDead(e, this.timers);
    return s?.kind === "loaded" ? s.live : undefined;
  }

  /**
   * The model's runtime while it loads, serves or stops (its snapshot for status, its slots; the
   * KV save before an unload asks whether its server is up, docs/agent.md#prompt-reuse).
   */
  runtimeOf(model: string): ModelRuntime | undefined {
    const s = this.entries.get(model)?.cell.get();
    if (s?.kind === "loaded") return s.live.runtime;
    return s?.kind === "loading" ? s.job.runtime : s?.kind === "unloading" ? s.runtime : undefined;
  }

  /**
   * What the other models hold now, per device, by their plans: a plan made from the memory
   * available now adds it back, so it is not counted twice (model-runtime.ts, plannedBytes).
   */
  heldByOthers(model: string): DeviceBytes[] {
    return this.held(model).map((h) => h.bytes);
  }

  private entry(name: string): Entry {
    const e = this.entries.get(name) ?? newEntry(name);
    this.entries.set(name, e); // a known name keeps its place
    return e;
  }

  private configuredPin(name: string): boolean | undefined {
    return this.options.configured().find((m) => m.name === name)?.pinned;
  }

  private pinned(e: Entry): boolean {
    return e.pin ?? this.configuredPin(e.name) ?? false;
  }

  /** A chat begins (+1) or ends (-1) on the model: it is used now; idle again, memory may be free. */
  private use(e: Entry, delta: 1 | -1, count: "users" | "claims" = "users"): void {
    e[count] += delta;
    e.lastUsedAt = this.timers.now();
    if (delta > 0) {
      this.timers.clearTimeout(e.idleTimer);
      return;
    }
    if (busy(e)) return;
    // The last chat ended before it joined the load its arrival began (it failed or was cancelled
    // while its turn prepared): a load still waiting for room is dropped, as when its waiters leave.
    const s = e.cell.get();
    if (s.kind === "loading") dropIfUnwanted(s.job);
    this.forget(e);
    this.armIdle(e);
    this.room.notify();
  }

  /**
   * A path (never a configured name) that no chat uses and that runs nothing, unloaded or failed
   * to load, is not kept for status: failed references would otherwise pile up. One whose server
   * died keeps its runtime, and so its restart budget, until `models.unload` clears it; one the
   * host pinned keeps its pin until then, across the core's own restart (`keepPin`).
   */
  private forget(e: Entry): void {
    const s = e.cell.get();
    if (busy(e) || this.configuredPin(e.name) !== undefined || e.pin === true) return;
    if (s.kind !== "unloaded" && (s.kind !== "failed" || s.runtime)) return;
    if (this.entries.get(e.name) === e) this.entries.delete(e.name);
  }

  /** `llama.idle_unload_s`: an idle, unpinned loaded model is stopped after that long unused. */
  private armIdle(e: Entry): void {
    this.timers.clearTimeout(e.idleTimer);
    const ms = this.options.settings().idleUnloadMs;
    const s = e.cell.get();
    if (ms <= 0 || s.kind !== "loaded" || busy(e) || this.pinned(e)) return;
    e.idleTimer = this.timers.setTimeout(() => {
      if (e.cell.get() !== s || busy(e) || this.pinned(e) || this.closing) return;
      this.beginUnload(e, s, cancelledError(`model "${e.name}" was idle`), true).catch((err) =>
        logUnexpected(`unloading idle model ${e.name} failed`, err),
      );
    }, ms);
  }

  /** The model loaded: at once, after an unload in progress, or by a load (begun or joined). */
  private async ready(
    e: Entry,
    signal: AbortSignal,
    onProgress: Progress,
    explicit: boolean,
    spare = false,
  ): Promise<Live> {
    for (;;) {
      if (this.closing) throw schedulerClosed();
      const s = settleDead(e, this.timers);
      if (s.kind === "loaded") return s.live;
      if (s.kind === "unloading") {
        await unloadedFor(e, s.done, signal);
        continue;
      }
      const job = s.kind === "loading" ? s.job : startLoad(e, s, this.loads, spare);
      // A caller that needs the model: its load makes room as any does.
      if (!spare) job.spare = false;
      return await joinLoad(job, signal, onProgress, explicit);
    }
  }

  /** The model's unload (model-unload.ts), on this scheduler's clock and room. */
  private beginUnload(e: Entry, s: Unloadable, reason: Error, save: boolean, forRoom = false): Promise<void> {
    return beginUnload(e, s, reason, { timers: this.timers, room: this.room, save, forRoom });
  }

  /** Admission's evictions: each chosen model leaves `loaded` now, then all stop. */
  private evict(models: readonly string[]): Promise<void> {
    const stops = models.map((name) => {
      const e = this.entries.get(name);
      const s = e?.cell.get();
      if (!e || s?.kind !== "loaded") return Promise.resolve();
      return this.beginUnload(e, s, cancelledError(`model "${name}" was unloaded to make room`), true, true);
    });
    return Promise.all(stops).then(() => {});
  }

  /** Every other model that holds memory now, as the decision sees it. */
  private held(except: string): HeldModel[] {
    return heldModels(this.entries.values(), except, this.timers, (e) => this.pinned(e));
  }
}
