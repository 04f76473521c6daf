import type { Open, Request } from "./documents-api.ts";
import type { CallOptions } from "./host-types.ts";
import type {
  ModelsLoadEvent,
  ModelsLoadParams,
  ModelsLoadResult,
  ModelsResult,
  ModelsUnloadParams,
  ModelsUnloadResult,
} from "./protocol-types.ts";
import type { RequestStream } from "./request-stream.ts";

/**
 * `client.models`: called, the `models` listing, as before; `.load()` and `.unload()` are
 * `models.load` and `models.unload` (docs/protocol.md#modelsload), named as on the wire like
 * `client.sessions.*`. One callable object, so the listing hosts already call keeps working.
 */
export interface ModelsApi {
  /** Every GGUF in the Hugging Face cache and beside the config, with whether it fits (docs/models.md). */
  (options?: CallOptions): Promise<ModelsResult>;
  /**
   * Starts a model's llama-server ahead of its first chat (or joins a load under way); its
   * `warmup_progress` events report progress, phase `waiting_for_memory` while other models hold
   * the room. Timed and cancellable like warmup: a cancel ends the wait, the load goes on.
   */
  load(params: ModelsLoadParams, options?: CallOptions): RequestStream<ModelsLoadEvent, ModelsLoadResult>;
  /**
   * Stops a model's llama-server; refused (`invalid_request`, `data.reason` `model_busy`) while a
   * chat runs on it or waits for it, unless `force` (those chats then end `cancelled`). Timed as a
   * short call; an abort or the time limit cancels it on the core's side while its path's drive is
   * asked (a dead network mount: 30 s); one aborted whose unload had begun resolves with its
   * result, its time limit rejects `timeout` at once all the same (the unload goes on).
   */
  unload(params: ModelsUnloadParams, options?: CallOptions): Promise<ModelsUnloadResult>;
}

/** `cancellable`: a short call the core cancels by its id (models.unload, docs/protocol.md). */
export function modelsApi(request: Request, open: Open, cancellable: Request): ModelsApi {
  const list = (options?: CallOptions) => request<ModelsResult>("models", {}, options);
  return Object.assign(list, {
    load: (params: ModelsLoadParams, options: CallOptions = {}) =>
      open<ModelsLoadEvent, ModelsLoadResult>("models.load", params, options),
    unload: (params: ModelsUnloadParams, options?: CallOptions) =>
      cancellable<ModelsUnloadResult>("models.unload", params, options),
  });
}
