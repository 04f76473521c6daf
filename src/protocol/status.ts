import { z } from "zod";
import { once } from "../util/once.ts";
import { ErrorCodeSchema, RequestIdSchema } from "./messages.ts";
import { severalModelsStatusFields } from "./model-state.ts";
import { rpcWorkerStatusSchema } from "./rpc-workers.ts";

/** `status` (docs/protocol.md#status): no params; any sent are dropped unread, as ping.ts says. */
export const StatusParamsSchema = z.object({});

/**
 * The `status` result: what the core and its llama-server are doing, for a host's status line.
 * Strict: every field is always present, `null` where it is unknown or does not apply (no
 * llama-server yet, an OS that does not show a figure). Times are ISO 8601 strings, durations
 * and sizes plain numbers (ms, bytes). Built on first ask (the schema export, tests), never to
 * answer: status is answered before any result schema is built. `llama` is the model section's
 * (`default`) llama-server; `models` has every model.
 */
export const statusResultSchema = once(() => {
  const count = z.number().int().nonnegative();
  const bytes = count.nullable();
  const llama = llamaStatusSchema();
  return z
    .strictObject({
      llama,
      core: z.strictObject({
        pid: z.number().int().positive(),
        /** Resident memory of the core itself, as the runtime reports it (every OS). */
        rss_bytes: bytes,
        uptime_ms: count,
      }),
      /**
       * Conversations' KV state saved under data_dir/kv (docs/agent.md#prompt-reuse): the bytes and
       * state files there, and `llama.kv_disk_bytes`. All null before the config is loaded (status
       * never loads it) or when saving is off (`kv_disk_bytes` 0); `used_bytes` and `files` null
       * while the core's first count of the folder (started by the first ask) is under way.
       */
      kv_disk: z.strictObject({ used_bytes: bytes, files: count.nullable(), budget_bytes: bytes }),
      /** One per configured RPC worker; empty when none is configured. */
      rpc_workers: z.array(rpcWorkerStatusSchema()),
      /** Requests in flight (chats, pulls, warmups…), oldest first; this status request excluded. */
      requests: requestsSchema(),
    })
    .extend({ ...severalModelsStatusFields(), memory_index: memoryIndexSchema() });
});
/** The `llama` part: the model section's server, and each model's in `models`. */
function llamaStatusSchema() {
  const count = z.number().int().nonnegative();
  const bytes = count.nullable();
  const iso = z.string();
  return z.strictObject({
    /**
     * - `stopped`: not running: never started (the first chat or warmup starts it), or stopped
     *   at shutdown.
     * - `starting`: being planned, spawned, loaded.
     * - `ready`: serving.
     * - `sleeping`: running with its model unloaded after `llama.idle_sleep_s` idle; the next
     *   chat reloads it (`waking` while it does).
     * - `restarting`: starting again after a crash or a wedge (a back-off first).
     * - `failed`: down after an error (`last_error`): a crash, a failed start, or a wedged
     *   server being stopped. The next chat or warmup starts it again; a crash's restart counts
     *   against `restarts`, and while those are spent only a warmup restarts it before
     *   `restarts.next_automatic_try_at`.
     */
    state: z.enum(["stopped", "starting", "ready", "sleeping", "restarting", "failed"]),
    /** Sleeping, and a chat is waiting for the model to reload. */
    waking: z.boolean(),
    /** Why it is down (failed), or what the restart under way follows (restarting). */
    last_error: z.strictObject({ code: ErrorCodeSchema, message: z.string() }).nullable(),
    pid: z.number().int().positive().nullable(),
    /** Of the last plan: the GGUF's path and its `general.name`. */
    model: z.strictObject({ path: z.string().nullable(), name: z.string().nullable() }),
    context_per_slot: count.nullable(),
    /**
     * Whether the model's chat template lets it think (docs/agent.md#thinking-and-structured-output):
     * from /props once a chat has read it, before that from the plan's reading of the template;
     * null before any plan, or when the template could not be read.
     */
    thinking: z.boolean().nullable(),
    /** Leases held (chats generating), callers waiting for one, and the plan's slots. */
    slots: z.strictObject({ busy: count, waiting: count, total: count.nullable() }),
    /** Resident memory (Linux: VmRSS of /proc/<pid>/status; null elsewhere). */
    rss_bytes: bytes,
    /** Since the serving process was spawned. */
    started_at: iso.nullable(),
    uptime_ms: count.nullable(),
    /** `--sleep-idle-seconds` it was started with (0: never sleeps); null before a start. */
    idle_sleep_s: count.nullable(),
    /**
     * llama-server's RAM prompt cache (`--cache-ram`) as planned: host memory on top of
     * `rss_bytes` at start-up, filled as conversations leave their slots; null before a plan.
     */
    cache_ram_bytes: bytes,
    /** The last plan's layers on a GPU (`-ngl`, 0 on the CPU); null before a plan. */
    gpu_layers: count.nullable(),
    /**
     * Starts of this server that ran out of GPU memory with layers on it, each later plan keeping
     * more of the GPU free (docs/supervisor.md, "Out of GPU memory at start-up"); `gpu_layers` is
     * then the replanned count.
     */
    gpu_out_of_memory: count,
    /**
     * While its last start, which failed once spawned, holds the next (docs/supervisor.md "Start
     * failures"): until when a chat's start of the same launch answers that failure at once (a
     * warmup tries at once); null when none is held. As `default`'s row in `models`.
     */
    start_held_until: iso.nullable(),
    restarts: z.strictObject({
      /** Automatic restarts within the window ending now. */
      used: count,
      /** llama.max_restarts and what is left of it; null when the config cannot be read. */
      max: count.nullable(),
      left: count.nullable(),
      window_s: z.number().nonnegative().nullable(),
      /** While the budget is spent after a crash: when a chat may restart it again. */
      next_automatic_try_at: iso.nullable(),
    }),
  });
}

/**
 * Memory's vectors (docs/agent.md, "Memory"): memory rows (turns, folder and document chunks)
 * with a vector of `model` (`memory.embedding_model`) out of all, as the background embedder last
 * counted them; `embedded` below `total` while it catches up (after a model change it starts
 * again from 0). Null without an embedding model, or before the store is opened.
 */
function memoryIndexSchema() {
  const count = z.number().int().nonnegative();
  const lastSetAside = z.strictObject({
    reason: z.enum(["too_long", "crashes_server", "not_finite", "no_vector"]),
    message: z.string(),
  });
  return z
    .strictObject({
      embedded: count,
      total: count,
      model: z.string(),
      set_aside: count,
      last_set_aside: lastSetAside.nullable(),
    })
    .nullable();
}

function requestsSchema() {
  const since = z.string();
  return z.array(
    z.strictObject({
      id: RequestIdSchema,
      method: z.string(),
      since,
      elapsed_ms: z.number().int().nonnegative(),
    }),
  );
}

export type CoreStatusResult = z.infer<ReturnType<typeof statusResultSchema>>;
export type LlamaStatus = CoreStatusResult["llama"];
export type LlamaState = LlamaStatus["state"];
export type ModelStatus = NonNullable<CoreStatusResult["models"]>[number];
export type MemoryStatus = NonNullable<CoreStatusResult["memory"]>[number];
