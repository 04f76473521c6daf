import type { LoadedConfig } from "../config/schema.ts";
import { logger, logUnexpected, setLogLevel } from "../util/logger.ts";

export interface CoreOptions {
  /** As given on the command line (default config.yaml), resolved against cwd. */
  configPath: string;
  cwd: string;
}

type Stopper = () => Promise<void>;

/**
 * The long-lived state of one core process: the config (loaded when first needed, so
 * ping/initialize/shutdown work without one) and lazily created services (supervisor, MCP
 * clients, stores), each with an optional stop hook run at shutdown in reverse order.
 */
export class Core {
  private loaded: LoadedConfig | undefined;
  private readonly services = new Map<string, unknown>();
  private readonly stoppers: { name: string; stop: Stopper }[] = [];
  private stopping: Promise<void> | undefined;
  private readonly configListeners: ((loaded: LoadedConfig) => void)[] = [];

  constructor(readonly options: CoreOptions) {}

  /** The config, loaded once; throws CoreError config_missing / config_invalid. */
  config(): LoadedConfig {
    if (!this.loaded) {
      // Loaded on first need: YAML and the config schemas stay out of a bare start-up.
      const { loadConfig } = require("../config/load.ts") as typeof import("../config/load.ts");
      const loaded = loadConfig(this.options.configPath, this.options.cwd);
      for (const w of loaded.warnings) logger.warn(w);
      setLogLevel(loaded.config.logging.level);
      this.loaded = loaded;
      for (const listener of this.configListeners) listener(loaded);
    }
    return this.loaded;
  }

  /** Runs `listener` once the config is loaded (at once if it already is). */
  onConfig(listener: (loaded: LoadedConfig) => void): void {
    if (this.loaded) listener(this.loaded);
    else this.configListeners.push(listener);
  }

  /** The config when there is one, else defaults (for diagnostics that must run regardless). */
  configOrDefaults(): LoadedConfig {
    try {
      return this.config();
    } catch {
      const { defaultConfig } = require("../config/load.ts") as typeof import("../config/load.ts");
      return defaultConfig(this.options.cwd);
    }
  }

  /**
   * How many chats run at once: the config's explicit limit, else its explicit slot count,
   * else one. The supervisor refines this from the plan once it exists.
   */
  parallelChats(): number {
    let config: LoadedConfig["config"];
    try {
      config = this.config().config;
    } catch {
      return 1;
    }
    if (typeof config.app.max_parallel_chats === "number") return config.app.max_parallel_chats;
    // Once the supervisor exists it knows the plan's slots (or the config's, before a plan).
    const llama = this.services.get("llama") as { slots(): number } | undefined;
    if (llama) return llama.slots();
    if (typeof config.llama.parallel === "number") return config.llama.parallel;
    return 1;
  }

  /** A service created on first use and stopped at shutdown. */
  service<T>(name: string, create: (core: Core) => T, stop?: (service: T) => Promise<void>): T {
    if (this.services.has(name)) return this.services.get(name) as T;
    const created = create(this);
    this.services.set(name, created);
    if (stop) this.stoppers.push({ name, stop: () => stop(created) });
    return created;
  }

  /** Stops every service once; safe to call from several shutdown paths at the same time. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      for (const { name, stop } of [...this.stoppers].reverse()) {
        try {
          await stop();
        } catch (err) {
          logUnexpected(`stopping ${name} failed`, err);
        }
      }
    })();
    return this.stopping;
  }
}
