import { resolve } from "node:path";
import type { KvDisk } from "../agent/kv/kv-disk.ts";
import type { PromptReuse, ReuseDeps } from "../agent/kv/reuse.ts";
import type { McpPool } from "../agent/mcp/pool.ts";
import { RefusalMemo } from "../config/refusal-memo.ts";
import type { Config, LoadedConfig } from "../config/schema.ts";
import type { EmbedChunks } from "../documents/add-document.ts";
import type { Services } from "../methods/services.ts";
import type { PullDeps } from "../models/pull.ts";
import type { LlamaProvider } from "../runtime/endpoint.ts";
import { earlierLogsSettled } from "../runtime/log-scrub.ts";
import type { ModelsApi } from "../runtime/models-api.ts";
import { migratingError } from "../store/db/migrating-error.ts";
import { ChatsRunning } from "../store/embed-room.ts";
import { ErasureWatch } from "../store/erasures.ts";
import { KeyedMutex } from "../store/keyed-mutex.ts";
import type { MemoryEmbedder } from "../store/memory-embedder.ts";
import type { Store, StoreOptions } from "../store/store.ts";
import { logger, logUnexpected, setLogLevel } from "../util/logger.ts";
import { readAheadForChat } from "./chat-read-ahead.ts";
import { KvErase } from "./kv-erase.ts";
import { MigrateFirst } from "./migrate-first.ts";
import { reuseStore } from "./reuse-store.ts";
import type { SeveralModels } from "./several-models.ts";
import { ShutdownOrder } from "./shutdown-order.ts";

export interface ServicesOptions {
  /** As given on the command line (default config.yaml), resolved against cwd. */
  configPath: string;
  cwd: string;
  /** Makes the llama-server provider; tests pass a stand-in. Default: the real supervisor. */
  llama?: (config: () => Config) => LlamaProvider;
  /** Tests: hooks of the store's (a 0.1 import held before a unit). */
  store?: Pick<StoreOptions, "beforeImportUnit">;
  /** Tests: prompt reuse's idle wait before its quiet save (default 2 s), and a view of each (reuse-deps.ts). */
  reuse?: Pick<ReuseDeps, "quietMs" | "quietSeen">;
}

/**
 * The composition root: the one place that creates the core's long-lived parts and hands
 * them down as plain values. The config loads on first need (so ping, initialize and shutdown
 * work without one); each service is created on first use, and `stop()` stops them once, in
 * the reverse order of their creation, the database last. Heavy modules (the supervisor and
 * planner, the MCP SDK, YAML) are required inside the getters so a bare start-up never loads
 * them.
 */
export class CoreServices implements Services {
  private loaded: LoadedConfig | undefined;
  private readonly configListeners: ((config: Config) => void)[] = [];
  private provider: LlamaProvider | undefined;
  private pool: McpPool | undefined;
  private locks: KeyedMutex | undefined;
  private database: Store | undefined;
  private reuse: PromptReuse | undefined;
  private kvDisk: KvDisk | null | undefined;
  /** Erases of saved KV state, over the folder as it lies (kv-erase.ts). */
  private readonly kvErase = new KvErase({
    dir: () => this.kvDir(),
    budgeted: () => this.disk(),
    made: () => this.kvDisk,
    reuse: () => this.reuse,
    several: () => this.several,
  });
  private several: SeveralModels | undefined;
  /** Memory's embedder: undefined until asked, null when there is none; the chats running, every embedder's. */
  private embedder: MemoryEmbedder | null | undefined;
  private readonly chats = new ChatsRunning();
  /** A chat has begun: the read-ahead leaves the modules to it (chat-read-ahead.ts). */
  private chatSeen = false;
  private readonly shutdown = new ShutdownOrder();
  readonly erasing = new ErasureWatch();
  private prepared = false;
  /** A pending migration run on a thread before the store opens (migrate-first.ts). */
  private readonly migration = new MigrateFirst({
    dataDir: () => this.config().app.data_dir,
    // An open store whose file was replaced (an older backup copied back) is opened again: its migrations too.
    needless: () => (this.database !== undefined && !this.database.stale()) || this.shutdown.begun,
    shutdown: this.shutdown,
  });
  private readonly refusal = new RefusalMemo();

  constructor(private readonly options: ServicesOptions) {
    // Stopped late: llama-server's stop first leaves a large old log's zeroing time (log-scrub.ts).
    this.shutdown.add("earlier logs' zeroing", null, () => earlierLogsSettled());
    // Added first, stopped after the prompt reuses' last saves and removals (kv-erase.ts `zeroed`).
    this.shutdown.add("KV state zeroing", null, () => this.kvErase.atShutdown());
  }

  loadedConfig(): LoadedConfig {
    if (!this.loaded) {
      const { loadConfig, refuseConfigPath } =
        require("../config/load.ts") as typeof import("../config/load.ts");
      // Before the memo's stat, which on Windows would open a pipe the path names.
      refuseConfigPath(this.options.configPath);
      const file = resolve(this.options.cwd, this.options.configPath);
      const loaded = this.refusal.run(file, () => loadConfig(this.options.configPath, this.options.cwd));
      for (const w of loaded.warnings) logger.warn(w);
      setLogLevel(loaded.config.logging.level);
      this.loaded = loaded;
      for (const listener of this.configListeners) listener(loaded.config);
    }
    return this.loaded;
  }

  config(): Config {
    return this.loadedConfig().config;
  }

  defaultConfig(): LoadedConfig {
    const { defaultConfig } = require("../config/load.ts") as typeof import("../config/load.ts");
    return defaultConfig(this.options.cwd);
  }

  outOfMemoryStarts(model: string): number {
    if (this.several) return this.several.outOfMemoryStarts(model);
    return model === "default" ? (this.provider?.snapshot?.().outOfMemoryStarts ?? 0) : 0;
  }

  /** Runs `listener` once the config is loaded (at once if it already is). */
  onConfig(listener: (config: Config) => void): void {
    if (this.loaded) listener(this.loaded.config);
    else this.configListeners.push(listener);
  }

  parallelChats(): number {
    let config: Config;
    try {
      config = this.config();
    } catch {
      return 1;
    }
    if (typeof config.app.max_parallel_chats === "number") return config.app.max_parallel_chats;
    // Once the supervisor exists it knows the plan's slots (or the config's, before a plan).
    if (this.provider) return this.provider.slots();
    if (typeof config.llama.parallel === "number") return config.llama.parallel;
    return 1;
  }

  llama(): LlamaProvider {
    if (!this.provider) {
      // Several models: the model section is one of the scheduler's (docs/models.md).
      const several = this.severalIfConfigured();
      if (several) {
        this.provider = several.provider({ kind: "path", name: "default" });
        return this.provider;
      }
      const config = () => this.config();
      const make =
        this.options.llama ??
        (require("../runtime/provider.ts") as typeof import("../runtime/provider.ts")).createSupervisor;
      const provider = make(config);
      this.provider = this.shutdown.add("llama", provider, () => provider.stop());
    }
    return this.provider;
  }

  /** What a first chat needs, read ahead after `initialize` (chat-read-ahead.ts). */
  prepareForChat(): void {
    if (this.prepared) return;
    this.prepared = true;
    readAheadForChat({
      standIn: this.options.llama !== undefined,
      config: () => this.config(),
      // A pending migration first, on its thread; a failure is the chat's to report.
      store: () =>
        this.storeReady()
          .then(() => this.shutdown.begun || this.store())
          .catch(() => {}),
      stopping: () => this.shutdown.begun,
      chatBegun: () => this.chatSeen,
    });
  }

  existingLlama(): LlamaProvider | undefined {
    return this.provider;
  }

  existingConfig(): Config | undefined {
    return this.loaded?.config;
  }

  mcp(): McpPool {
    if (!this.pool) {
      const { McpPool } = require("../agent/mcp/pool.ts") as typeof import("../agent/mcp/pool.ts");
      const config = this.config();
      const pool = new McpPool(config.mcp_servers, Date.now, config.app.data_dir);
      this.pool = this.shutdown.add("mcp", pool, () => pool.close(), { beside: true });
    }
    return this.pool;
  }

  sessionLocks(): KeyedMutex {
    this.locks ??= new KeyedMutex();
    return this.locks;
  }

  /** Resolves once the store opens with no migration on this loop (migrate-first.ts). */
  storeReady(): Promise<void> {
    return this.migration.ready();
  }

  storeWait(): Promise<void> | undefined {
    return this.migration.wait();
  }

  store(): Store {
    // A second connection now would wait on the thread's write lock, blocking this loop. A store
    // open on a file replaced under it (an older backup) serves the work under way till then.
    if (this.migration.running) {
      if (this.database) return this.database;
      throw migratingError(this.config().app.data_dir);
    }
    const stale = this.database?.stale();
    if (stale) this.dropStore(this.database as Store, stale);
    if (!this.database) {
      const { app, memory } = this.config();
      const { Store } = require("../store/store.ts") as typeof import("../store/store.ts");
      const store = this.migration.openOnLoop(() =>
        Store.open(app.data_dir, {
          ...this.options.store,
          resetAhead: this.migration.resetMade(),
          checkedAhead: this.migration.checkedAhead(),
          folders: memory.folders,
          erasing: this.erasing,
          // A folder's passages are every user's: a file gone or changed leaves no saved state quoting it.
          folderIndex: {
            onGone: (sources) => void this.kvErase.folderGone(...sources),
            // A memory folder holding the app's own folder: its sessions' files and its config are not memory.
            exclude: [app.data_dir, resolve(this.options.cwd, this.options.configPath)],
          },
        }),
      );
      // Closed last whenever it was opened: every other service may still ask it as it stops.
      this.database = this.shutdown.add("store", store, () => store.stop(), { last: true });
      this.migration.opened();
      if (memory.enabled && memory.embedding_model !== null) {
        // Rows without vectors (folders, another model's) are embedded from the first open, not
        // from the first chat; off this call, which a sessions method may be waiting on.
        setTimeout(() => this.memoryIndex(), 0).unref?.();
      }
    }
    return this.database;
  }

  /**
   * The database was removed or replaced under this core (the data folder deleted, a file put in
   * its place), or was opened read-only and can be written now: the store is closed and the call
   * that noticed opens one at the path, as a start would, or names why it cannot (docs/agent.md,
   * The store). Its embedder goes with it.
   */
  private dropStore(old: Store, problem: string): void {
    const embedder = this.embedder;
    this.database = undefined;
    this.embedder = undefined;
    logger.warn(
      `the database ${old.path} was ${problem} while the core ran: closed; it is opened again at its path`,
    );
    void (async () => {
      await embedder?.stop();
      await old.stop();
    })().catch((err) => logUnexpected("closing the removed database failed", err));
  }

  memoryIndex(options?: { create: boolean }): MemoryEmbedder | undefined {
    if (options?.create === false || this.embedder !== undefined || this.shutdown.begun)
      return this.embedder ?? undefined;
    this.embedder = null;
    try {
      const config = this.config();
      if (!config.memory.enabled || config.memory.embedding_model === null) return undefined;
      const models = this.severalIfConfigured();
      if (!models) return undefined;
      const store = this.store();
      const { memoryEmbedder } = require("./memory-embedding.ts") as typeof import("./memory-embedding.ts");
      const made = memoryEmbedder(config, store, models, undefined, this.chats);
      if (made) this.embedder = this.shutdown.add("memory embedder", made, () => made.stop());
    } catch (err) {
      // No config or no store: the request that needs them reports it; asked again next time.
      this.embedder = undefined;
      logger.debug(`memory's embedder not made: ${(err as Error).message}`);
    }
    return this.embedder ?? undefined;
  }

  /** Counted for memory's job whether or not it is made yet: one made later knows it runs (embed-room.ts). */
  chatBegan(): () => void {
    this.chatSeen = true;
    return this.embedder?.chatBegan() ?? this.chats.begin();
  }

  get embedChunks(): EmbedChunks | undefined {
    const embedder = this.memoryIndex();
    return embedder ? (ids, onProgress, signal) => embedder.embedChunks(ids, onProgress, signal) : undefined;
  }

  promptReuse(model?: string): PromptReuse {
    const several = this.severalIfConfigured();
    if (several) return several.promptReuse(model ?? "default");
    if (!this.reuse) {
      // The provider first: services stop in reverse, so the last saves go before llama-server
      // stops (and the store, closed last, can still say the session is there to keep).
      const reuse = this.makeReuse(this.llama());
      this.reuse = this.shutdown.add("prompt reuse", reuse, () => reuse.stop());
    }
    return this.reuse;
  }

  /** Several models (docs/models.md), only for a config with `models` entries: else undefined. */
  models(options?: { create: boolean }): ModelsApi | undefined {
    if (options?.create === false) return this.several;
    return this.severalIfConfigured();
  }

  private severalIfConfigured(): SeveralModels | undefined {
    if (this.several || this.options.llama) return this.several;
    let config: Config;
    try {
      config = this.config();
    } catch {
      return undefined; // the request that asked reports the config itself
    }
    if (config.models.length === 0) return undefined;
    const { SeveralModels } = require("./several-models.ts") as typeof import("./several-models.ts");
    const { planInputs } = require("../plan/launch.ts") as typeof import("../plan/launch.ts");
    const several = new SeveralModels({
      config: () => this.config(),
      reuse: (_model, provider) => this.makeReuse(provider),
      plan: (config, deps) => planInputs(config, deps),
    });
    this.several = this.shutdown.add("models", several, () => several.stop());
    return several;
  }

  /** One server's prompt reuse (docs/agent.md#prompt-reuse), over the KV disk and the store. */
  private makeReuse(provider: LlamaProvider): PromptReuse {
    // The store opens when first asked, not here: its open (~15 ms cold) would delay a cold chat's spawn.
    const { llama } = this.config();
    const { PromptReuse } = require("../agent/kv/reuse.ts") as typeof import("../agent/kv/reuse.ts");
    return new PromptReuse({
      llama,
      disk: this.disk(),
      cacheRamBytes: () => provider.snapshot?.().cacheRamBytes ?? null,
      ...reuseStore(() => this.store()),
      ...this.options.reuse,
    });
  }

  forgetKv(userId: string, sessionId?: string): string[] {
    return this.kvErase.forget(userId, sessionId);
  }

  /** The files the KV erases removed, zeroed on the disk (kv-erase.ts `zeroed`). */
  kvZeroed(left?: readonly string[]): Promise<void> {
    return this.kvErase.zeroed(left);
  }

  /** What memory notes quote erased, from the saved KV state of `userId` (every user's: undefined). */
  forgetKvSource(userId: string | undefined, ...sources: string[]): string[] {
    return this.kvErase.forgetSource(userId, ...sources);
  }

  /** The saved KV state an edit's erase of its session's tail reaches, what stays logged and retried (kv-erase.ts `edited`). */
  forgetEditedKv(userId: string, sessionId: string, model: string, quoted?: boolean): void {
    this.kvErase.edited(userId, sessionId, model, quoted);
  }

  pullDeps(): PullDeps {
    // Required here, like the other services' modules: a bare start-up never loads it.
    const { machinePullDeps } = require("./pull-deps.ts") as typeof import("./pull-deps.ts");
    return machinePullDeps();
  }

  kvDiskUse(): { bytes: number | null; files: number | null; budget_bytes: number } | null {
    const disk = this.loaded ? this.disk() : null;
    return disk && { ...(disk.usage() ?? { bytes: null, files: null }), budget_bytes: disk.budgetBytes };
  }

  /** The KV state folder (data_dir/kv), null when `llama.kv_disk_bytes` is 0. */
  private disk(): KvDisk | null {
    if (this.kvDisk === undefined) {
      const { llama } = this.config();
      const { KvDisk } = require("../agent/kv/kv-disk.ts") as typeof import("../agent/kv/kv-disk.ts");
      this.kvDisk = llama.kv_disk_bytes > 0 ? new KvDisk(this.kvDir(), llama.kv_disk_bytes) : null;
    }
    return this.kvDisk;
  }

  private kvDir(): string {
    const { kvDirOf } =
      require("../plan/decide/slot-save.ts") as typeof import("../plan/decide/slot-save.ts");
    return kvDirOf(this.config().app.data_dir);
  }

  /** Stops every service once; safe to call from several shutdown paths at the same time. */
  stop(): Promise<void> {
    return this.shutdown.stop();
  }
}
