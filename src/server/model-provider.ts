import type { AcquireOptions, LlamaLease, LlamaProvider } from "../runtime/endpoint.ts";
import type { Scheduler } from "../runtime/scheduler.ts";
import type { SupervisorSnapshot } from "../runtime/snapshot.ts";
import type { StartProgress } from "../runtime/start-progress.ts";

/**
 * One model as a chat sees it when the core runs several (docs/supervisor.md "Scheduling several
 * models"): the turn's provider, whose acquire is the scheduler's (the model loaded, room made or
 * waited for, `waiting_for_memory` heard as progress). Its llama-server is the scheduler's to
 * stop, so `stop()` here does nothing.
 */
export class ModelProvider implements LlamaProvider {
  constructor(
    private readonly scheduler: Scheduler,
    readonly model: string,
    /** Slots before its runtime exists (the config's `llama.parallel`, else one). */
    private readonly fallbackSlots: () => number,
  ) {}

  /** Whether it ever gave a lease: only then can the model's prompt reuse hold records (several-models.ts). */
  served = false;

  async acquire(
    signal: AbortSignal,
    onProgress?: (p: StartProgress) => void,
    options?: AcquireOptions,
  ): Promise<LlamaLease> {
    // The scheduler's progress adds `waiting_for_memory`, which warmup_progress carries too.
    const progress = onProgress as ((p: unknown) => void) | undefined;
    const lease = await this.scheduler.acquire(this.model, signal, progress, options);
    this.served = true;
    return lease;
  }

  /**
   * A start of the loaded model's server (a restart keeps its back-off), or an unloaded model's
   * load (scheduler.ts `prestart`). Not a loading model's (its start waits for admission) nor a
   * stopping one's (ending); a failed one loads again on acquire.
   */
  prestart() {
    return this.scheduler.loaded(this.model)?.runtime.prestart() ?? this.scheduler.prestart(this.model);
  }

  connectAhead() {
    return this.scheduler.loaded(this.model)?.runtime.connectAhead?.();
  }

  readsImages() {
    return this.scheduler.loaded(this.model)?.runtime.readsImages?.();
  }

  slots(): number {
    return this.scheduler.runtimeOf(this.model)?.slots() ?? this.fallbackSlots();
  }

  snapshot(): SupervisorSnapshot {
    const runtime = this.scheduler.runtimeOf(this.model);
    return runtime ? runtime.snapshot() : stoppedSnapshot(this.fallbackSlots());
  }

  async stop(): Promise<void> {}
}

/** What status reads of a model with no llama-server: as the supervisor's own before a start. */
function stoppedSnapshot(slots: number): SupervisorSnapshot {
  return {
    state: "stopped",
    pid: null,
    startedAt: null,
    readyAt: null,
    lastError: null,
    restartPending: false,
    restarts: { used: 0, max: null, windowMs: null, nextAutomaticTryAt: null },
    slots: { busy: 0, waiting: 0, total: slots },
    sleep: "awake",
    idleSleepMs: null,
    model: { path: null, name: null, bytes: null, contextPerSlot: null, thinking: null, vision: null },
    cacheRamBytes: null,
    gpuLayers: null,
    outOfMemoryStarts: 0,
    startHeldUntil: null,
  };
}
