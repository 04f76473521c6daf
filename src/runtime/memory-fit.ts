/**
 * Whether one more model fits beside the ones loaded, decided by memory and never by count
 * (docs/supervisor.md "Scheduling several models"). Pure: the scheduler hands
 * in what each model's plan says it holds per device and each device's budget.
 */

/** Bytes per device id (`cpu`, `gpu<N>`, `rpc<N>`): a model's plan's `usage.total`, or a budget. */
export type DeviceBytes = Readonly<Record<string, number>>;

/** A model that holds memory now: loaded, loading once admitted, or being unloaded. */
export interface HeldModel {
  name: string;
  bytes: DeviceBytes;
  /** A chat streams on it or waits for it; a load or an unload in progress counts too. */
  busy: boolean;
  pinned: boolean;
  /** Clock time it was last used (ms); the least recent is unloaded first. */
  lastUsedAt: number;
}

/** The model asked for, planned as if it were alone. */
export interface Ask {
  name: string;
  bytes: DeviceBytes;
}

export type FitDecision =
  | { kind: "fits" }
  /** Fits once these idle models are unloaded, least recently used first. */
  | { kind: "evict"; models: string[] }
  /** Nothing more can be unloaded: these models hold the memory it lacks. */
  | { kind: "wait"; holders: string[] }
  /** More than a device's whole budget, even with nothing else loaded. */
  | { kind: "never"; devices: DeviceShortfall[] };

export interface DeviceShortfall {
  device: string;
  needed_bytes: number;
  budget_bytes: number;
}

/** Per device, what `held` takes in all. */
export function heldBytes(held: readonly { bytes: DeviceBytes }[]): Record<string, number> {
  const sum: Record<string, number> = {};
  for (const m of held) for (const [d, b] of Object.entries(m.bytes)) sum[d] = (sum[d] ?? 0) + b;
  return sum;
}

/** The devices where `ask` takes more than the budget leaves once `held` is counted. */
function shortDevices(held: readonly HeldModel[], budget: DeviceBytes, ask: Ask): string[] {
  const used = heldBytes(held);
  return Object.entries(ask.bytes)
    .filter(([d, b]) => b > 0 && (used[d] ?? 0) + b > (budget[d] ?? 0))
    .map(([d]) => d);
}

/** Whether `m` takes anything on one of `devices`: unloading a model that holds none frees nothing there. */
const holdsOn = (m: HeldModel, devices: readonly string[]) => devices.some((d) => (m.bytes[d] ?? 0) > 0);

/**
 * The decision for `ask`. Only the devices the asked model uses are held against the budget
 * (a device it takes nothing from cannot be short for it). A device missing from `budget` has
 * none. Candidates are the idle, unpinned models other than the one asked for, least recently
 * used first; they are taken in that order, skipping one that frees nothing where memory is
 * short, and then any taken one no longer needed (most recent first) is given back, so the
 * fewest models are unloaded and the ones unloaded are the least recently used.
 */
export function decideFit(held: readonly HeldModel[], budget: DeviceBytes, ask: Ask): FitDecision {
  const never = Object.entries(ask.bytes)
    .filter(([d, b]) => b > (budget[d] ?? 0))
    .map(([device, b]) => ({ device, needed_bytes: b, budget_bytes: budget[device] ?? 0 }));
  if (never.length > 0) return { kind: "never", devices: never };
  if (shortDevices(held, budget, ask).length === 0) return { kind: "fits" };

  const candidates = held
    .filter((m) => !m.busy && !m.pinned && m.name !== ask.name)
    .sort((a, b) => a.lastUsedAt - b.lastUsedAt || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const chosen: HeldModel[] = [];
  let remaining = [...held];
  for (const c of candidates) {
    const short = shortDevices(remaining, budget, ask);
    if (short.length === 0) break;
    if (!holdsOn(c, short)) continue;
    chosen.push(c);
    remaining = remaining.filter((m) => m !== c);
  }
  const stillShort = shortDevices(remaining, budget, ask);
  if (stillShort.length > 0) {
    return { kind: "wait", holders: remaining.filter((m) => holdsOn(m, stillShort)).map((m) => m.name) };
  }
  // Give back the most recent ones the rest made unnecessary.
  for (const c of [...chosen].reverse()) {
    const without = chosen.filter((m) => m !== c);
    const kept = held.filter((m) => !without.includes(m));
    if (shortDevices(kept, budget, ask).length === 0) chosen.splice(chosen.indexOf(c), 1);
  }
  return { kind: "evict", models: chosen.map((m) => m.name) };
}
