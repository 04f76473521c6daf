import { configuredModels } from "../config/model-entry.ts";
import type { ModelState } from "../protocol/model-state.ts";
import type { LlamaStatus, MemoryStatus, ModelStatus } from "../protocol/status.ts";
import { logger } from "../util/logger.ts";
import type { Services } from "./services.ts";

/**
 * Status's `models` and `memory` (docs/protocol.md#status). Several models' own answer once a core
 * serves them; until then the model section (`default`) from the `llama` object status already
 * read, and any other configured model `unloaded`. Never loads the config, never fails.
 */
export function modelsStatus(
  services: Services,
  llama: LlamaStatus,
): { models: ModelStatus[]; memory: MemoryStatus[] } {
  try {
    const several = services.models?.({ create: false });
    if (several) return several.status();
  } catch (err) {
    logger.warn(`status could not read the models: ${String((err as Error)?.message ?? err)}`);
  }
  const config = services.existingConfig?.();
  const [first, ...rest] = config ? configuredModels(config) : [];
  const main: ModelStatus = {
    name: "default",
    path: llama.model.path ?? first?.path ?? null,
    kind: "chat",
    state: modelState(llama.state),
    pid: llama.pid,
    pinned: false,
    vision: visionOf(services),
    memory_bytes: null,
    gpu_layers: llama.gpu_layers,
    gpu_out_of_memory: llama.gpu_out_of_memory,
    start_held_until: heldUntilOf(services),
    rss_bytes: llama.rss_bytes,
    slots: llama.slots,
    // The one supervisor keeps no time of its last use.
    last_used_at: null,
  };
  const others = rest.map(
    (m): ModelStatus => ({
      name: m.name,
      path: m.path,
      kind: m.kind,
      state: "unloaded",
      pid: null,
      pinned: m.pin,
      vision: null,
      memory_bytes: null,
      gpu_layers: null,
      gpu_out_of_memory: 0,
      start_held_until: null,
      rss_bytes: null,
      slots: { busy: 0, waiting: 0, total: null },
      last_used_at: null,
    }),
  );
  return { models: [main, ...others], memory: [] };
}

/** Whether the model section's last plan launched a projector (docs/models.md "The projector"); null before one. */
function visionOf(services: Services): boolean | null {
  try {
    return services.existingLlama()?.snapshot?.().model.vision ?? null;
  } catch {
    return null;
  }
}

/** Until when the model section's start is held after a failure (docs/supervisor.md "Start failures"); null: none. */
function heldUntilOf(services: Services): string | null {
  try {
    const until = services.existingLlama()?.snapshot?.().startHeldUntil ?? null;
    return until === null ? null : new Date(until).toISOString();
  } catch {
    return null;
  }
}

function modelState(state: LlamaStatus["state"]): ModelState {
  return state === "stopped" ? "unloaded" : state;
}
