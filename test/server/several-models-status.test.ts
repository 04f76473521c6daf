import { describe, expect, test } from "bun:test";
import { describeLlama } from "../../src/methods/status.ts";
import type { SleepPhase } from "../../src/runtime/idle-sleep.ts";
import type { Scheduler } from "../../src/runtime/scheduler.ts";
import type { ModelRow } from "../../src/runtime/scheduler-snapshot.ts";
import type { SupervisorSnapshot } from "../../src/runtime/snapshot.ts";
import { statusOf } from "../../src/server/several-models-status.ts";

// docs/protocol.md#status: a `models` row's state is one of `llama`'s, `sleeping` included, and
// `llama` (the `default` model's) and its row say the same of one server.

const row: ModelRow = {
  name: "default",
  state: "loaded",
  pinned: false,
  pid: null,
  memory_bytes: 1,
  slots: { busy: 0, waiting: 0, total: 1 },
  chats: 0,
  last_used_at: null,
  error: undefined,
};

function served(sleep: SleepPhase): SupervisorSnapshot {
  return {
    state: "ready",
    pid: null,
    startedAt: 1,
    readyAt: 1,
    lastError: null,
    restartPending: false,
    restarts: { used: 0, max: 3, windowMs: 300_000, nextAutomaticTryAt: null },
    slots: { busy: 0, waiting: 0, total: 1 },
    sleep,
    idleSleepMs: 300_000,
    model: { path: "/m.gguf", name: "m", bytes: 1, contextPerSlot: 512, thinking: false, vision: false },
    cacheRamBytes: 0,
    gpuLayers: 0,
    outOfMemoryStarts: 0,
    startHeldUntil: null,
  };
}

describe("several models' status rows", () => {
  test("a sleeping model reads sleeping while it wakes too, as status's llama object says (waking: true)", () => {
    for (const sleep of ["awake", "asleep", "waking"] as const) {
      const snap = served(sleep);
      const scheduler = {
        snapshot: () => ({ models: [row], memory: [] }),
        runtimeOf: () => ({ snapshot: () => snap }),
      } as unknown as Scheduler;
      const [model] = statusOf(scheduler, []).models;
      expect(model?.state as string).toBe(describeLlama(snap, 2, () => null).state);
    }
  });
});
