import type { PromptReuse } from "../agent/kv/reuse.ts";
import { type ModelChoice, shownName } from "../config/choose-model.ts";
import { configuredModels } from "../config/model-entry.ts";
import type { Config } from "../config/schema.ts";
import { type PinnedSetProblem, pinnedSetMessage, pinnedSetProblem } from "../models/pinned-set.ts";
import type { EmbedResult } from "../protocol/embed.ts";
import { CoreError, cancelledError, type ErrorCode } from "../protocol/errors.ts";
import { HF_PREFIX } from "../protocol/model-ref.ts";
import type { ModelsLoadResult } from "../protocol/models-load.ts";
import type { ModelsUnloadResult } from "../protocol/models-unload.ts";
import type { MemoryStatus, ModelStatus } from "../protocol/status.ts";
import type { WarmupProgress } from "../protocol/warmup-progress.ts";
import type { LaunchView } from "../runtime/launch.ts";
import { START_FAILURE_HOLD_MS } from "../runtime/launcher.ts";
import type { DeviceBytes } from "../runtime/memory-fit.ts";
import type { ModelRuntime } from "../runtime/model-runtime.ts";
import type { ModelsApi } from "../runtime/models-api.ts";
import { Scheduler } from "../runtime/scheduler.ts";
import type { SupervisorSnapshot } from "../runtime/snapshot.ts";
import { type StartFailure, startHeldUntil } from "../runtime/supervisor-options.ts";
import { logUnexpected } from "../util/logger.ts";
import { embedFailure } from "./embed-failure.ts";
import { CrashSuspects } from "./embed-suspects.ts";
import { ModelProvider } from "./model-provider.ts";
import { makeModelRuntime, planDepsBeside, type RuntimeDeps } from "./model-runtime.ts";
import { servedPaths, statusOf } from "./several-models-status.ts";
import { type EmbedDeadline, watchedEmbed } from "./watched-embed.ts";

export interface SeveralModelsDeps {
  config(): Config;
  /** The model's prompt reuse's edges the composition root owns (the KV disk, the store). */
  reuse(model: string, provider: ModelProvider): PromptReuse;
  plan: RuntimeDeps["plan"];
  /**
   * The pinned models' plans held together against the budget: by default `pinnedSetProblem`
   * over the machine with what the loaded models hold added back, as each model's plan sees it.
   */
  pinnedProblem?: (config: Config, held: DeviceBytes[]) => Promise<PinnedSetProblem | null>;
  /** One model's runtime; the real one unless a test hands in a fake. */
  runtime?: (name: string) => ModelRuntime;
  /** An embedding request's deadline (watched-embed.ts); tests hand in a short one. */
  embedDeadline?: EmbedDeadline;
}

/**
 * Several models served at once (docs/models.md "Several models"): the
 * scheduler over one runtime per model, each chat's provider and prompt reuse by model, and the
 * methods' `models.load`, `models.unload`, `embed` and status rows. Made by the composition root
 * only for a config with `models` entries.
 */
export class SeveralModels implements ModelsApi {
  readonly scheduler: Scheduler;
  private readonly providers = new Map<string, ModelProvider>();
  private readonly reuses = new Map<string, PromptReuse>();
  /** A path model's file by its own name where its name is a link's target (choose-model.ts `file`). */
  private readonly files = new Map<string, string>();
  /**
   * An `hf:` reference a request gave → the path model it named then: once the file is deleted
   * from the cache, or the reference moved to another revision, it names another (or none), and
   * `models.unload` by the reference that loaded it no longer found the server (`runningAs`).
   */
  private readonly refs = new Map<string, string>();
  /** Each model's starts that ran out of GPU memory, across its loads (model-runtime.ts). */
  private readonly outOfMemory = new Map<string, number>();
  /** Each model's last start that failed once spawned, held across its loads (model-runtime.ts). */
  private readonly startFailures = new Map<string, StartFailure>();
  /** The chats (and embeds) on each model, so a forced unload ends them `cancelled`. */
  private readonly chats = new Map<string, Set<AbortController>>();
  /**
   * The inputs each embedding model's server died on (embed-suspects.ts), across its loads of the
   * same files and flags (`suspectsOf`).
   */
  private readonly suspects = new Map<string, { of: string; suspects: CrashSuspects }>();

  /** The pinned set's check, made once per config (docs/models.md "Several models"). */
  private pinnedCheck: { config: Config; done: Promise<void> } | undefined;

  constructor(private readonly deps: SeveralModelsDeps) {
    const llama = () => deps.config().llama;
    this.scheduler = new Scheduler({
      runtime:
        deps.runtime ??
        ((name) =>
          makeModelRuntime(name, {
            config: deps.config,
            heldByOthers: (m) => this.scheduler.heldByOthers(m),
            reuse: (m) => this.promptReuse(m),
            file: (m) => this.files.get(m),
            plan: deps.plan,
            outOfMemory: this.outOfMemory,
            startFailures: this.startFailures,
          })),
      beforeLoad: () => this.checkPinned(),
      settings: () => ({
        loadWaitMs: llama().load_wait_s * 1000,
        idleUnloadMs: llama().idle_unload_s * 1000,
      }),
      configured: () => configuredModels(deps.config()).map((m) => ({ name: m.name, pinned: m.pin })),
      cancelChats: (model) => {
        for (const c of this.chats.get(model) ?? []) c.abort(cancelledError(`model "${model}" was unloaded`));
      },
    });
  }

  /** Models with bookkeeping here: a provider, a prompt reuse or a chat set (tests count it). */
  get kept(): number {
    return this.names().size;
  }

  /** A model's starts that ran out of GPU memory, over all its loads in this core. */
  outOfMemoryStarts(model: string): number {
    return this.outOfMemory.get(model) ?? 0;
  }

  /**
   * Before a load: pinned models are never unloaded to make room, so a pinned set that alone
   * exceeds the budget could never be loaded together; every load is refused `model_plan_error`
   * naming them, checked again at each load until it passes (docs/models.md "Several models").
   */
  private checkPinned(): Promise<void> {
    const config = this.deps.config();
    if (this.pinnedCheck?.config !== config) {
      const held = this.scheduler.heldByOthers("");
      const check =
        this.deps.pinnedProblem ??
        ((c, h) =>
          pinnedSetProblem(
            c,
            planDepsBeside(() => h),
          ));
      const done = check(config, held).then((problem) => {
        if (problem) throw pinnedSetRefused(problem);
      });
      this.pinnedCheck = { config, done };
      // Only a pass is kept: the budget is what the devices had free then, and memory another
      // program held for a moment must not refuse every load for the core's life.
      done.catch(() => {
        if (this.pinnedCheck?.done === done) this.pinnedCheck = undefined;
      });
    }
    return this.pinnedCheck.done;
  }

  /** Every model with bookkeeping here. */
  private names(): Set<string> {
    return new Set([
      ...this.providers.keys(),
      ...this.reuses.keys(),
      ...this.chats.keys(),
      ...this.files.keys(),
      ...this.refs.values(),
    ]);
  }

  /** A path model's file as its next runtime gives it to llama-server, kept as long as the model is (`forgetUnused`). */
  private noteFile(model: ModelChoice): void {
    if (model.kind !== "path") return;
    if (model.file !== undefined) this.files.set(model.name, model.file);
    if (model.asGiven?.startsWith(HF_PREFIX)) this.refs.set(model.asGiven, model.name);
  }

  /** The model a request's `hf:` reference loaded, where the file it names now runs nothing. */
  private runningAs(model: ModelChoice): string {
    const running = (name: string) => (this.stateOf(name) ?? "unloaded") !== "unloaded";
    const before = model.kind === "path" ? this.refs.get(shownName(model)) : undefined;
    return before !== undefined && !running(model.name) && running(before) ? before : model.name;
  }

  private stateOf(name: string) {
    return this.scheduler.snapshot().models.find((m) => m.name === name)?.state;
  }

  provider(model: ModelChoice): ModelProvider {
    this.noteFile(model);
    let p = this.providers.get(model.name);
    if (!p) {
      p = new ModelProvider(this.scheduler, model.name, () => {
        const parallel = this.deps.config().llama.parallel;
        return typeof parallel === "number" ? parallel : 1;
      });
      this.providers.set(model.name, p);
    }
    return p;
  }

  /** The model's prompt reuse: one per model, kept across its unloads (its records, its saves). */
  promptReuse(model: string): PromptReuse {
    let r = this.reuses.get(model);
    if (!r) {
      r = this.deps.reuse(model, this.provider({ kind: "path", name: model }));
      this.reuses.set(model, r);
    }
    return r;
  }

  /** A session's (or user's) KV state erased from every model's reuse; false when none was made. */
  forget(userId: string, sessionId?: string): boolean {
    for (const r of this.reuses.values()) r.forget(userId, sessionId);
    return this.reuses.size > 0;
  }

  /**
   * An edit on `model` replaced its session's tail: that model's slot holds the edited prompt and
   * stays (one another session took there, unread, is emptied); any other model's slot or record of the session still holds the replaced tail, and
   * would save it over the edited state, so the session goes from those as for a delete. What
   * quotes the session goes everywhere (kv-erase.ts `forgetEdited`), unless not `quoted`.
   */
  forgetEdited(userId: string, sessionId: string, model: string, quoted = true): boolean {
    for (const [name, r] of this.reuses) {
      if (name === model) r.forgetEdited(userId, sessionId, quoted);
      else r.forget(userId, sessionId);
    }
    return this.reuses.size > 0;
  }

  /** What memory notes quote erased from every model's reuse; false when none was made. */
  forgetSource(userId: string | undefined, ...sources: string[]): boolean {
    for (const r of this.reuses.values()) r.forgetSource(userId, ...sources);
    return this.reuses.size > 0;
  }

  /**
   * A chat's signal that a forced unload of its model also aborts; `done()` when it ends. The
   * chat counts as its model's user from here (the scheduler's `claim`): an unload sent right
   * after it is refused `model_busy` (docs/protocol.md#modelsunload).
   */
  chatSignal(model: ModelChoice, signal: AbortSignal): { signal: AbortSignal; done(): void } {
    const c = new AbortController();
    const set = this.chats.get(model.name) ?? new Set();
    set.add(c);
    this.chats.set(model.name, set);
    const release = this.scheduler.claim(model.name);
    return {
      signal: AbortSignal.any([signal, c.signal]),
      done: () => {
        set.delete(c);
        release();
        this.forgetUnused();
      },
    };
  }

  /**
   * A path (never a configured name) that no chat uses, that runs no server and whose provider
   * never gave a lease (so its prompt reuse holds no record) is forgotten: its provider, reuse
   * and chat set. A host naming ever new
   * paths (missing files, refused ones) would otherwise grow the core for its life; a path that
   * served keeps its reuse, whose records outlive its unloads (docs/models.md "Several models").
   */
  private forgetUnused(): void {
    let configured: Set<string>;
    try {
      configured = new Set(configuredModels(this.deps.config()).map((m) => m.name));
    } catch {
      return; // a config that cannot be read now: the next chat's end looks again
    }
    for (const name of this.names()) {
      if (configured.has(name) || (this.chats.get(name)?.size ?? 0) > 0) continue;
      if (this.scheduler.runtimeOf(name) || this.providers.get(name)?.served) continue;
      this.providers.delete(name);
      this.reuses.delete(name);
      this.chats.delete(name);
      this.files.delete(name);
      for (const [ref, to] of this.refs) if (to === name) this.refs.delete(ref);
    }
  }

  async load(
    model: ModelChoice,
    options: { pin: boolean | undefined; signal: AbortSignal; onProgress(p: WarmupProgress): void },
  ): Promise<ModelsLoadResult> {
    this.noteFile(model);
    const r = await this.scheduler.load(model.name, {
      ...(options.pin === undefined ? {} : { pin: options.pin }),
      signal: options.signal,
      onProgress: (p) => options.onProgress(p as WarmupProgress),
    });
    return { model: shownName(model), state: "ready", memory_bytes: r.memory_bytes };
  }

  async unload(
    model: ModelChoice,
    options: { force: boolean; keepPin?: boolean },
  ): Promise<ModelsUnloadResult> {
    const name = this.runningAs(model);
    const s = this.stateOf(name);
    if (s === undefined || s === "unloaded") return { model: shownName(model), unloaded: false };
    // A failed model is cleared (a path's row goes); it ran nothing to stop.
    await this.scheduler.unload(name, { force: options.force, keepPin: options.keepPin === true });
    return { model: shownName(model), unloaded: s !== "failed" };
  }

  async embed(
    model: ModelChoice,
    input: string[],
    signal: AbortSignal,
    onLaunch?: (launch: LaunchView) => void,
    options?: { spare?: boolean },
  ): Promise<Omit<EmbedResult, "model">> {
    const watch = this.chatSignal(model, signal);
    let lease: Awaited<ReturnType<Scheduler["acquire"]>> | undefined;
    try {
      lease = await this.scheduler.acquire(model.name, watch.signal, undefined, options);
      onLaunch?.(lease.launch);
      const suspects = this.suspectsOf(model.name, lease.launch);
      const out = await watchedEmbed(lease, input, watch.signal, this.deps.embedDeadline, suspects);
      return {
        dimensions: out.embeddings[0]?.length ?? 1,
        embeddings: out.embeddings,
        usage: { prompt_tokens: out.promptTokens },
      };
    } catch (err) {
      throw embedFailure(err, watch.signal);
    } finally {
      // A failed load too ends the embed's claim on its model.
      lease?.release();
      watch.done();
    }
  }

  /**
   * The crash suspects of `name` as `launch` runs it: its model file (path, size, time, inode) and
   * flags. Another file under the name (a pull replaced it) or other flags is another model, whose
   * crashes are its own: kept by name alone, a string the old file crashed on was refused unsent
   * by the new one, and memory's job set its row aside under the new file's fingerprint.
   */
  private suspectsOf(name: string, launch: LaunchView): CrashSuspects {
    const of = JSON.stringify([launch.files, launch.extraArgs]);
    const kept = this.suspects.get(name);
    if (kept?.of === of) return kept.suspects;
    const fresh = { of, suspects: new CrashSuspects() };
    this.suspects.set(name, fresh);
    return fresh.suspects;
  }

  status(): { models: ModelStatus[]; memory: MemoryStatus[] } {
    // A path whose last chat ended while its load went on, and which has stopped since.
    this.forgetUnused();
    return statusOf(
      this.scheduler,
      configuredModels(this.deps.config()),
      (m) => this.outOfMemoryStarts(m),
      (m) => startHeldUntil(this.startFailures.get(m), START_FAILURE_HOLD_MS, Date.now()),
    );
  }

  supervisorSnapshot(name: string): SupervisorSnapshot | undefined {
    const state = this.scheduler.snapshot().models.find((m) => m.name === name)?.state;
    return state === "loaded" || state === "loading" ? this.scheduler.runtimeOf(name)?.snapshot() : undefined;
  }

  failure(name: string): { code: ErrorCode; message: string } | undefined {
    const row = this.scheduler.snapshot().models.find((m) => m.name === name);
    if (row?.state !== "failed") return undefined;
    const err = row.error;
    if (err instanceof CoreError) return { code: err.code, message: err.message };
    return {
      code: "internal_error",
      message: `model "${name}" failed: ${(err as Error)?.message ?? String(err)}`,
    };
  }

  loadedPaths(): string[] {
    // Serving now, as status's state says: not one being unloaded (its server saving, stopping),
    // nor one still loading, which a host's picker showed loaded beside the model taking its room.
    return servedPaths(this.scheduler);
  }

  /**
   * Shutdown: each model's sessions saved while its server still runs, then every server stopped.
   * The saves run side by side (one server each): one after another, each up to STOP_SAVE_MS,
   * a few models outlast what a host waits for the answer (client/shutdown-timing.ts) and it
   * kills the core before the servers are stopped. Loads are refused from the start, saves included.
   */
  stop(): Promise<void> {
    const saves = [...this.reuses].map(([name, reuse]) =>
      reuse.stop().catch((err) => logUnexpected(`saving model ${name}'s sessions failed`, err)),
    );
    return this.scheduler.stop(() => Promise.all(saves));
  }
}

/** The pinned set over the budget, as doctor words it (src/models/pinned-set.ts). */
function pinnedSetRefused(problem: PinnedSetProblem): CoreError {
  return new CoreError("model_plan_error", `${pinnedSetMessage(problem)}; unpin one of them`, {
    models: [...problem.models],
    devices: problem.devices.map((d) => ({ ...d })),
  });
}
