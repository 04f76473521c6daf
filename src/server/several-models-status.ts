import type { ConfiguredModel } from "../config/model-entry.ts";
import type { ModelState } from "../protocol/model-state.ts";
import type { MemoryStatus, ModelStatus } from "../protocol/status.ts";
import { residentBytes } from "../runtime/proc-memory.ts";
import type { Scheduler } from "../runtime/scheduler.ts";
import type { ModelRow } from "../runtime/scheduler-snapshot.ts";
import type { SupervisorSnapshot } from "../runtime/snapshot.ts";

/**
 * Status's `models` and `memory` from the scheduler's snapshot (docs/protocol.md#status): the
 * scheduler's states, each running model's own supervisor snapshot, and path and kind from the
 * config. No I/O but `/proc` for resident memory, as status's `llama` object reads it.
 */
export function statusOf(
  scheduler: Scheduler,
  configured: readonly ConfiguredModel[],
  outOfMemory: (model: string) => number = () => 0,
  heldUntil: (model: string) => number | null = () => null,
): { models: ModelStatus[]; memory: MemoryStatus[] } {
  const snap = scheduler.snapshot();
  const models = snap.models.map((row): ModelStatus => {
    const conf = configured.find((m) => m.name === row.name);
    const sup = scheduler.runtimeOf(row.name)?.snapshot();
    return {
      name: row.name,
      path: conf?.path ?? sup?.model.path ?? row.name,
      kind: conf?.kind ?? "chat",
      state: stateOf(row, sup),
      pid: row.pid,
      pinned: row.pinned,
      // What its last plan launched (a projector: docs/models.md "The projector"); unknown before one.
      vision: sup?.model.vision ?? null,
      memory_bytes: row.memory_bytes,
      gpu_layers: sup?.gpuLayers ?? null,
      // Over its loads: the runtime counts its own and those before (model-runtime.ts).
      gpu_out_of_memory: sup?.outOfMemoryStarts ?? outOfMemory(row.name),
      // A failed or unloaded model has no runtime: its hold is kept across its loads (model-runtime.ts).
      start_held_until: isoOrNull(sup?.startHeldUntil ?? heldUntil(row.name)),
      rss_bytes: row.pid === null ? null : residentBytes(row.pid),
      slots: row.slots ?? { busy: 0, waiting: 0, total: null },
      last_used_at: row.last_used_at === null ? null : new Date(row.last_used_at).toISOString(),
    };
  });
  const memory = snap.memory.map((m) => ({
    device: m.device,
    budget_bytes: m.budget_bytes ?? 0,
    planned_bytes: m.planned_bytes,
  }));
  return { models, memory };
}

function isoOrNull(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

/**
 * The files its llama-servers serve now, as status's states say (the `models` listing's `loaded`):
 * `ready` or `sleeping`, not one loading, being unloaded, or loaded but its server down
 * (`restarting`, `failed`), which a host's picker showed loaded beside status's error.
 */
export function servedPaths(scheduler: Scheduler): string[] {
  return scheduler.snapshot().models.flatMap((row) => {
    const sup = scheduler.runtimeOf(row.name)?.snapshot();
    const state = stateOf(row, sup);
    const path = sup?.model.path;
    return (state === "ready" || state === "sleeping") && typeof path === "string" ? [path] : [];
  });
}

/** The scheduler's state, with its llama-server's own while it holds one (sleeping, restarting). */
function stateOf(row: ModelRow, sup: SupervisorSnapshot | undefined): ModelState {
  switch (row.state) {
    case "loading":
      return "starting";
    case "failed":
      return "failed";
    case "unloaded":
    case "unloading":
      return "unloaded";
    default:
      // Waking is still `sleeping`, as status's `llama` says it (with `waking: true`).
      if (!sup || sup.state === "ready") return (sup?.sleep ?? "awake") === "awake" ? "ready" : "sleeping";
      return sup.state === "starting" ? "restarting" : sup.lastError ? "failed" : "restarting";
  }
}
