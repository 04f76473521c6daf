import { type DeviceBytes, heldBytes } from "./memory-fit.ts";
import type { ModelRuntime } from "./model-runtime.ts";
import { heldBy, type ModelState, type ModelStateKind } from "./model-state.ts";

/** One model as `status` shows it (docs/models.md "Several models"), read without touching llama-server. */
export interface ModelRow {
  name: string;
  state: ModelStateKind;
  pinned: boolean;
  /** Its llama-server's pid once spawned, while it loads or serves. */
  pid: number | null;
  /** Its plan's bytes on every device together, while it holds them; else null. */
  memory_bytes: number | null;
  slots: { busy: number; waiting: number; total: number } | null;
  /** Chats holding or waiting for a lease on it. */
  chats: number;
  /** Clock time (ms since the epoch) it was last asked for or released; null: never. */
  last_used_at: number | null;
  /** Why it is `failed`. */
  error: unknown;
}

export interface MemoryRow {
  device: string;
  /** The device's budget as the last plan saw it; null when no plan named it yet. */
  budget_bytes: number | null;
  /** What the models loaded, loading or stopping hold there, by their plans. */
  planned_bytes: number;
}

export interface SchedulerSnapshot {
  models: ModelRow[];
  memory: MemoryRow[];
}

/** What the snapshot reads of one model. */
export interface ModelView {
  name: string;
  state: ModelState;
  pinned: boolean;
  chats: number;
  lastUsedAt: number | null;
}

function runtimeOf(s: ModelState): ModelRuntime | undefined {
  if (s.kind === "loaded") return s.live.runtime;
  if (s.kind === "loading") return s.job.runtime;
  return undefined;
}

const total = (b: DeviceBytes | undefined) =>
  b === undefined ? null : Object.values(b).reduce((sum, x) => sum + x, 0);

export function modelRow(m: ModelView): ModelRow {
  const snap = runtimeOf(m.state)?.snapshot();
  return {
    name: m.name,
    state: m.state.kind,
    pinned: m.pinned,
    pid: snap?.pid ?? null,
    memory_bytes: total(heldBy(m.state)),
    slots: snap ? { ...snap.slots } : null,
    chats: m.chats,
    last_used_at: m.lastUsedAt,
    error: m.state.kind === "failed" ? m.state.error : null,
  };
}

/** Per device: its budget and what the models' plans hold there. */
export function memoryRows(states: readonly ModelState[], budget: DeviceBytes): MemoryRow[] {
  const held = heldBytes(states.flatMap((s) => (heldBy(s) ? [{ bytes: heldBy(s) as DeviceBytes }] : [])));
  const devices = [...new Set([...Object.keys(budget), ...Object.keys(held)])].sort();
  return devices.map((device) => ({
    device,
    budget_bytes: budget[device] ?? null,
    planned_bytes: held[device] ?? 0,
  }));
}
