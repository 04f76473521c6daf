import { type ActiveRequest, LISTED_REQUESTS } from "../protocol/method-table.ts";
import {
  type CoreStatusResult,
  type LlamaState,
  type LlamaStatus,
  StatusParamsSchema,
  statusResultSchema,
} from "../protocol/status.ts";
import { coreResidentBytes, residentBytes } from "../runtime/proc-memory.ts";
import type { SupervisorSnapshot } from "../runtime/snapshot.ts";
import { logger } from "../util/logger.ts";
import { defineMethod } from "./definition.ts";
import type { Services } from "./services.ts";
import { modelsStatus } from "./status-models.ts";

/**
 * `status` (docs/protocol.md#status): llama-server's state, memory, slots and restarts, the core's
 * own memory, and the requests in flight. Answered at once from what the core already knows: no
 * HTTP call to llama-server (idle sleep is learned by the supervisor's own timer, idle-sleep.ts),
 * no config load, and it never creates the supervisor: before the first chat or warmup it says
 * `stopped`. It never fails while the core runs: whatever broke is a field of the answer.
 */
export const status = defineMethod({
  name: "status",
  params: StatusParamsSchema,
  result: statusResultSchema,
  run: (_params, ctx, services) => {
    const now = Date.now();
    const llama = llamaStatus(services, now);
    const models = modelsStatus(services, llama);
    // The llama object speaks of `default`: unloaded among several, its count of starts that ran
    // out of GPU memory lives on in its row (several-models-status.ts), and its next load plans with it.
    const main = models.models.find((m) => m.name === "default");
    // Its held start too: a `default` failed to load holds no runtime, its row the hold (several-models.ts).
    if (main) {
      llama.gpu_out_of_memory = Math.max(llama.gpu_out_of_memory, main.gpu_out_of_memory);
      llama.start_held_until ??= main.start_held_until;
    }
    return {
      llama,
      ...models,
      core: {
        pid: process.pid,
        rss_bytes: coreResidentBytes(),
        uptime_ms: Math.round(process.uptime() * 1000),
      },
      kv_disk: kvDisk(services),
      rpc_workers: rpcWorkers(services),
      requests: requestsInFlight(ctx.activeRequests(), ctx.id, now),
      memory_index: services.memoryIndex?.({ create: false })?.progress() ?? null,
    } satisfies CoreStatusResult;
  },
});

function llamaStatus(services: Services, now: number): LlamaStatus {
  try {
    // With several models the model section is the scheduler's `default`, not the one supervisor.
    const several = services.models?.({ create: false });
    const snapshot = services.existingLlama()?.snapshot?.() ?? several?.supervisorSnapshot("default");
    const llama = describeLlama(snapshot, now, residentBytes);
    // A `default` whose load or restart failed holds no supervisor to read: `stopped` would hide why.
    const failed = snapshot === undefined ? several?.failure("default") : undefined;
    return failed ? { ...llama, state: "failed", last_error: failed } : llama;
  } catch (err) {
    // The supervisor's own read is guarded; this is the last line, so status still answers.
    return {
      ...describeLlama(undefined, now, residentBytes),
      state: "failed",
      last_error: {
        code: "internal_error",
        message: `status could not read llama-server's state: ${String((err as Error)?.message ?? err)}`,
      },
    };
  }
}

/** What status says of llama-server, from the supervisor's snapshot (none: never started). */
export function describeLlama(
  snap: SupervisorSnapshot | undefined,
  now: number,
  rss: (pid: number) => number | null,
): LlamaStatus {
  const restarts = snap?.restarts;
  const max = restarts?.max ?? null;
  const used = restarts?.used ?? 0;
  const serving = snap?.startedAt != null && (snap.state === "ready" || snap.state === "stopping");
  return {
    state: snap ? stateOf(snap) : "stopped",
    waking: snap?.state === "ready" && snap.sleep === "waking",
    last_error: snap?.lastError ? { code: snap.lastError.code, message: snap.lastError.message } : null,
    pid: snap?.pid ?? null,
    model: { path: snap?.model.path ?? null, name: snap?.model.name ?? null },
    context_per_slot: snap?.model.contextPerSlot ?? null,
    thinking: snap?.model.thinking ?? null,
    slots: snap
      ? { busy: snap.slots.busy, waiting: snap.slots.waiting, total: snap.slots.total }
      : { busy: 0, waiting: 0, total: null },
    rss_bytes: snap?.pid != null ? rss(snap.pid) : null,
    started_at: serving ? new Date(snap.startedAt as number).toISOString() : null,
    uptime_ms: serving ? Math.max(0, now - (snap.startedAt as number)) : null,
    idle_sleep_s: snap?.idleSleepMs != null ? Math.round(snap.idleSleepMs / 1000) : null,
    cache_ram_bytes: snap?.cacheRamBytes ?? null,
    gpu_layers: snap?.gpuLayers ?? null,
    gpu_out_of_memory: snap?.outOfMemoryStarts ?? 0,
    start_held_until: snap?.startHeldUntil != null ? new Date(snap.startHeldUntil).toISOString() : null,
    restarts: {
      used,
      max,
      left: max === null ? null : Math.max(0, max - used),
      window_s: restarts?.windowMs != null ? restarts.windowMs / 1000 : null,
      next_automatic_try_at:
        restarts?.nextAutomaticTryAt != null ? new Date(restarts.nextAutomaticTryAt).toISOString() : null,
    },
  };
}

/**
 * The saved KV state on disk (docs/agent.md#prompt-reuse), as the core last counted it; never an
 * error. The bytes and files null until the first count is done: a partial count read as a total.
 */
function kvDisk(services: Services): CoreStatusResult["kv_disk"] {
  try {
    const use = services.kvDiskUse?.();
    if (use) return { used_bytes: use.bytes, files: use.files, budget_bytes: use.budget_bytes };
  } catch (err) {
    logger.warn(`status could not read the KV state folder: ${String((err as Error)?.message ?? err)}`);
  }
  return { used_bytes: null, files: null, budget_bytes: null };
}

/** The supervisor's own states, as a host reads them (docs/protocol.md, status). */
function stateOf(snap: SupervisorSnapshot): LlamaState {
  switch (snap.state) {
    case "starting":
      return snap.restartPending ? "restarting" : "starting";
    case "ready":
      return snap.sleep === "awake" ? "ready" : "sleeping";
    case "stopping":
      // A failed (wedged) server being stopped; the next chat starts it again.
      return "failed";
    case "stopped":
      return snap.lastError ? "failed" : "stopped";
    case "closing":
    case "closed":
      return "stopped";
  }
}

/** In flight now, oldest first, without the status request asking. */
function requestsInFlight(active: ActiveRequest[], self: ActiveRequest["id"], now: number) {
  return active
    .filter((r) => r.id !== self)
    .slice(0, LISTED_REQUESTS)
    .map((r) => ({
      // An id kept as its text (a number beyond a double) is written as that number: the wire's type.
      id: r.id as string | number,
      method: r.method,
      since: new Date(r.since).toISOString(),
      elapsed_ms: Math.max(0, now - r.since),
    }));
}

/**
 * RPC workers (llama.rpc, docs/distributed.md): each configured worker as the worker book last saw
 * it (doctor, plan or the supervisor's check before a start); never a network call on this path.
 * Empty when none is configured, or before the config has loaded (status never loads it).
 */
function rpcWorkers(services: Services): CoreStatusResult["rpc_workers"] {
  try {
    const rpc = services.existingConfig?.()?.llama.rpc ?? [];
    if (rpc.length === 0) return [];
    const { rpcWorkerSnapshot } = require("../rpc/workers.ts") as typeof import("../rpc/workers.ts");
    return rpcWorkerSnapshot(rpc.map((w) => w.endpoint));
  } catch (err) {
    // Status never fails; the workers it cannot describe are left out, and the log says why.
    logger.warn(`status could not read the RPC workers: ${String((err as Error)?.message ?? err)}`);
    return [];
  }
}
