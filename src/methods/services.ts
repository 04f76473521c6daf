import type { PromptReuse } from "../agent/kv/reuse.ts";
import type { McpPool } from "../agent/mcp/pool.ts";
import type { Config, LoadedConfig } from "../config/schema.ts";
import type { EmbedChunks } from "../documents/add-document.ts";
import type { PullDeps } from "../models/pull.ts";
import type { LlamaProvider } from "../runtime/endpoint.ts";
import type { ModelsApi } from "../runtime/models-api.ts";
import type { ErasureWatch } from "../store/erasures.ts";
import type { KeyedMutex } from "../store/keyed-mutex.ts";
import type { MemoryEmbedder } from "../store/memory-embedder.ts";
import type { Store } from "../store/store.ts";

/**
 * What a method may ask of the core: the config and the long-lived services, each created on
 * first use. Built by the composition root (src/server/services.ts), which also stops them;
 * a method only uses them.
 */
export interface Services {
  /** The config, loaded on first need; throws CoreError config_missing / config_invalid. */
  config(): Config;
  /** The same, with the file it came from and its warnings (doctor reports them). */
  loadedConfig(): LoadedConfig;
  /** The defaults, resolved against the working directory, for diagnostics without a config. */
  defaultConfig(): LoadedConfig;
  /**
   * How many chats run at once: the config's explicit limit, else the running supervisor's
   * slots, else the config's explicit slot count, else one.
   */
  parallelChats(): number;
  /**
   * Reads ahead, once the core is idle, what a first chat needs: the chat method's modules, the
   * supervisor's and planner's, and the model's header (kept while the file is unchanged).
   * Creates no service and starts nothing; a failure is left for the chat to report.
   */
  prepareForChat(): void;
  /** The llama-server supervisor (or the stand-in a test put in its place). */
  llama(): LlamaProvider;
  /** The same, only if a chat or warmup has already created it (status never creates it). */
  existingLlama(): LlamaProvider | undefined;
  /** The config, only if something has loaded it already (status never loads it). */
  existingConfig(): Config | undefined;
  /** The MCP clients, one per configured server. */
  mcp(): McpPool;
  /** One lock per user/session, so two chats never write the same session at once. */
  sessionLocks(): KeyedMutex;
  /** The conversation database, opened on first need; refused while its migrations run on their thread. */
  store(): Store;
  /** Resolves once `store()` opens with no migration on this loop (runs a pending one on a thread). */
  storeReady(): Promise<void>;
  /**
   * The migration a method that uses the store waits for (begun now if one is pending: a 100-byte
   * read until the store is open), or undefined: nothing to wait for.
   */
  storeWait(): Promise<void> | undefined;
  /** This process's turns, stopped when their session is erased; watched before the database opens. */
  readonly erasing: ErasureWatch;
  /**
   * Slots kept per session, prompt records, KV state on disk (docs/agent.md#prompt-reuse); made
   * with the llama provider. With several models, each model's own (default: `default`'s).
   */
  promptReuse(model?: string): PromptReuse;
  /**
   * A session's (or, without one, a user's) saved KV state and prompt records erased with it;
   * the files of `data_dir/kv` an erase could not remove and that are still there.
   */
  forgetKv(userId: string, sessionId?: string): string[];
  /** What memory notes quote erased (`document:<id>`): every saved KV state and record holding a passage of it. */
  forgetKvSource(userId: string, source: string): string[];
  /** The files those erases removed, zeroed on the disk (a delete answers after: docs/agent.md, The store). */
  kvZeroed?(left?: readonly string[]): Promise<void>;
  /**
   * An edit's or a regenerate's erase of its session's tail, in the saved KV state: the session's
   * own state saved before it, its state on other models than `model` (the edit's), and what
   * quotes the session (not `quoted`: a set-aside turn's, its own state only); the files that could
   * not be removed.
   */
  forgetEditedKv?(userId: string, sessionId: string, model: string, quoted?: boolean): void;
  /** A pull's edges on this machine (its environment, the home folder), read when asked. */
  pullDeps(): PullDeps;
  /**
   * The saved KV state on disk for `status`; null before the config is loaded, or with saving off;
   * `bytes` and `files` null while the first count (sliced, agent/kv/kv-use.ts) is under way.
   */
  kvDiskUse?(): { bytes: number | null; files: number | null; budget_bytes: number } | null;
  /**
   * Several models (docs/models.md, "Several models"), once a core wires them; absent, the core
   * serves the model section (`default`) alone through `llama()`. `status` asks with
   * `{ create: false }` and gets undefined unless something has created it.
   */
  models?(options?: { create: boolean }): ModelsApi | undefined;
  /**
   * Memory's vectors (docs/agent.md, "Memory"): the background embedder over the store, only
   * when memory is on and `memory.embedding_model` is set (and the core serves several models).
   * `status` asks with `{ create: false }`.
   */
  memoryIndex?(options?: { create: boolean }): MemoryEmbedder | undefined;
  /**
   * A chat, warmup or `models.load` begins (store/embed-room.ts): counted for memory's job made
   * now or later, so the job waits for its end before taking the room. Answers its end.
   */
  chatBegan?(): () => void;
  /**
   * Embeds these memory rows now (a document's chunks once `documents.add` has committed them,
   * docs/agent.md "Documents"), reporting rows done of all; defined only when an embedding model
   * is configured (else documents are found by FTS alone). A failure of the model leaves the rows
   * to the background job and still resolves; a cancel rejects.
   */
  readonly embedChunks?: EmbedChunks;
}
