import { Scheduler } from "../../../src/runtime/scheduler.ts";
import { FakeFleet, type FakeSpec } from "./fake-model-runtime.ts";
import { FakeTimers } from "./fake-timers.ts";

/**
 * A scheduler over fake runtimes on a 10 GiB gpu0, with a fake clock; `pinned` by the config.
 * Every spec is a configured model unless `paths` names it (a model asked for by path).
 */
export function schedulerOver(
  specs: Record<string, FakeSpec>,
  pinned: string[] = [],
  paths: string[] = [],
  loadWaitMs = 120_000,
) {
  const fleet = new FakeFleet(specs);
  const timers = new FakeTimers();
  const cancelled: string[] = [];
  const scheduler = new Scheduler({
    runtime: fleet.runtime,
    settings: () => ({ loadWaitMs, idleUnloadMs: 0 }),
    configured: () =>
      Object.keys(specs)
        .filter((name) => !paths.includes(name))
        .map((name) => ({ name, pinned: pinned.includes(name) })),
    cancelChats: (m) => cancelled.push(m),
    timers,
  });
  const row = (name: string) => scheduler.snapshot().models.find((m) => m.name === name);
  const planned = () => scheduler.snapshot().memory.find((m) => m.device === "gpu0")?.planned_bytes;
  return { fleet, timers, scheduler, cancelled, row, planned };
}
