import type { ModelChoice } from "../config/choose-model.ts";
import type { EmbedResult } from "../protocol/embed.ts";
import type { ErrorCode } from "../protocol/errors.ts";
import type { ModelsLoadResult } from "../protocol/models-load.ts";
import type { ModelsUnloadResult } from "../protocol/models-unload.ts";
import type { MemoryStatus, ModelStatus } from "../protocol/status.ts";
import type { WarmupProgress } from "../protocol/warmup-progress.ts";
import type { LlamaProvider } from "./endpoint.ts";
import type { LaunchView } from "./launch.ts";
import type { SupervisorSnapshot } from "./snapshot.ts";

/**
 * What the methods ask of several models (docs/models.md, "Several models"): one llama-server per
 * loaded model, what stays loaded decided by memory. Types only: the scheduler implements it,
 * the composition root hands it out as `Services.models`; until then a core serves `default`
 * alone.
 */
export interface ModelsApi {
  /**
   * A chat's (or an embed's) signal on this model: aborted `cancelled` also when a forced unload
   * ends it (docs/protocol.md#modelsunload). The chat counts as the model's user from this call
   * (an unload without force is refused); call `done()` once the chat has ended, whatever way.
   */
  chatSignal(model: ModelChoice, signal: AbortSignal): { signal: AbortSignal; done(): void };
  /** The provider a chat on this model leases slots from (its load begun or joined on acquire). */
  provider(model: ModelChoice): LlamaProvider;
  /**
   * Loads it (or joins its load), reporting `warmup_progress`; throws `model_plan_error` when it
   * does not fit, alone or within llama.load_wait_s.
   */
  load(
    model: ModelChoice,
    options: { pin: boolean | undefined; signal: AbortSignal; onProgress(p: WarmupProgress): void },
  ): Promise<ModelsLoadResult>;
  /**
   * Stops it; throws `invalid_request` (`data.reason: "model_busy"`) while chats use it, unless
   * `force`. `keepPin`: the core restarts it (not the host): a `models.load` pin and load stand.
   */
  unload(model: ModelChoice, options: { force: boolean; keepPin?: boolean }): Promise<ModelsUnloadResult>;
  /**
   * One vector per string, in order; loads the model first. `onLaunch`: the server that makes
   * them. `spare`: its load unloads no model to make room (recall's query: scheduler.ts `acquire`).
   */
  embed(
    model: ModelChoice,
    input: string[],
    signal: AbortSignal,
    onLaunch?: (launch: LaunchView) => void,
    options?: { spare?: boolean },
  ): Promise<Omit<EmbedResult, "model">>;
  /** Every configured model and any loaded by path, and the memory budget per device: no I/O. */
  status(): { models: ModelStatus[]; memory: MemoryStatus[] };
  /**
   * The model's llama-server as its supervisor sees it while it loads or serves; undefined when
   * it is unloaded, failed or being unloaded. Status's `llama` object describes `default` by it.
   */
  supervisorSnapshot(name: string): SupervisorSnapshot | undefined;
  /**
   * What the model's last load or restart failed with, while it is `failed` (no supervisor to
   * read then); else undefined. Status's `llama` object says `failed` by it for `default`.
   */
  failure(name: string): { code: ErrorCode; message: string } | undefined;
  /** The GGUF paths its llama-servers serve now (the `models` listing's `loaded`). */
  loadedPaths(): string[];
}
