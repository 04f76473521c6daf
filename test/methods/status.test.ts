import { describe, expect, test } from "bun:test";
import { ConfigSchema } from "../../src/config/schema.ts";
import { methodTable } from "../../src/methods/index.ts";
import type { Services } from "../../src/methods/services.ts";
import { describeLlama } from "../../src/methods/status.ts";
import { CoreError } from "../../src/protocol/errors.ts";
import { LISTED_REQUESTS, type RequestContext } from "../../src/protocol/method-table.ts";
import { statusResultSchema } from "../../src/protocol/status.ts";
import type { LlamaProvider } from "../../src/runtime/endpoint.ts";
import type { SupervisorSnapshot } from "../../src/runtime/snapshot.ts";

const NOW = Date.parse("2026-12-01T10:00:00Z");

function snap(over: Partial<SupervisorSnapshot> = {}): SupervisorSnapshot {
  return {
    state: "ready",
    pid: 4242,
    startedAt: NOW - 60_000,
    readyAt: NOW - 59_000,
    lastError: null,
    restartPending: false,
    restarts: { used: 0, max: 3, windowMs: 300_000, nextAutomaticTryAt: null },
    slots: { busy: 1, waiting: 0, total: 2 },
    sleep: "awake",
    idleSleepMs: 300_000,
    model: {
      path: "/m/tiny.gguf",
      name: "tiny",
      bytes: 9_000_000,
      contextPerSlot: 2048,
      thinking: true,
      vision: false,
    },
    cacheRamBytes: 64 * 2 ** 20,
    gpuLayers: 0,
    outOfMemoryStarts: 0,
    startHeldUntil: null,
    ...over,
  };
}

const crash = new CoreError("internal_error", "llama-server crashed (killed by SIGKILL)");

describe("what status says of llama-server, from the supervisor's snapshot", () => {
  test.each([
    ["no supervisor yet (before the first chat or warmup)", "stopped", undefined],
    ["a first start", "starting", snap({ state: "starting", pid: null, startedAt: null })],
    [
      "a start after a crash",
      "restarting",
      snap({ state: "starting", restartPending: true, lastError: crash }),
    ],
    ["serving", "ready", snap()],
    ["serving, model unloaded", "sleeping", snap({ sleep: "asleep" })],
    ["serving, model reloading", "sleeping", snap({ sleep: "waking" })],
    [
      "crashed, not yet restarted",
      "failed",
      snap({ state: "stopped", pid: null, lastError: crash, restartPending: true }),
    ],
    [
      "a failed start",
      "failed",
      snap({ state: "stopped", pid: null, lastError: new CoreError("model_missing", "gone") }),
    ],
    [
      "a wedged server being stopped",
      "failed",
      snap({ state: "stopping", lastError: crash, restartPending: true }),
    ],
    ["shutting down", "stopped", snap({ state: "closing", pid: null })],
    ["shut down", "stopped", snap({ state: "closed", pid: null })],
  ] as const)("%s → %s", (_name, state, s) => {
    const status = describeLlama(s, NOW, () => 51_000_000);
    expect(status.state).toBe(state);
    // Every answer is a valid result piece, whatever the state.
    expect(() =>
      statusResultSchema().parse({
        llama: status,
        core: { pid: 1, rss_bytes: null, uptime_ms: 0 },
        kv_disk: { used_bytes: null, files: null, budget_bytes: null },
        rpc_workers: [],
        requests: [],
        memory_index: null,
      }),
    ).not.toThrow();
  });

  test("ready: pid, memory, model, context, slots, uptime, idle sleep, restarts used and left", () => {
    expect(
      describeLlama(
        snap({ restarts: { used: 1, max: 3, windowMs: 300_000, nextAutomaticTryAt: null } }),
        NOW,
        (pid) => pid * 10,
      ),
    ).toEqual({
      state: "ready",
      waking: false,
      last_error: null,
      pid: 4242,
      model: { path: "/m/tiny.gguf", name: "tiny" },
      context_per_slot: 2048,
      thinking: true,
      slots: { busy: 1, waiting: 0, total: 2 },
      rss_bytes: 42420,
      started_at: new Date(NOW - 60_000).toISOString(),
      uptime_ms: 60_000,
      idle_sleep_s: 300,
      cache_ram_bytes: 64 * 2 ** 20,
      gpu_layers: 0,
      gpu_out_of_memory: 0,
      start_held_until: null,
      restarts: { used: 1, max: 3, left: 2, window_s: 300, next_automatic_try_at: null },
    });
  });

  test("after starts that ran out of GPU memory: how many, and the layers the replanned start has", () => {
    const s = describeLlama(snap({ gpuLayers: 18, outOfMemoryStarts: 2 }), NOW, () => null);
    expect(s.gpu_layers).toBe(18);
    expect(s.gpu_out_of_memory).toBe(2);
    expect(describeLlama(undefined, NOW, () => null)).toMatchObject({
      gpu_layers: null,
      gpu_out_of_memory: 0,
    });
  });

  test("failed with the budget spent: the error and when a chat may restart it again", () => {
    const s = describeLlama(
      snap({
        state: "stopped",
        pid: null,
        startedAt: null,
        lastError: crash,
        restartPending: true,
        restarts: { used: 3, max: 3, windowMs: 300_000, nextAutomaticTryAt: NOW + 5000 },
      }),
      NOW,
      () => null,
    );
    expect(s).toMatchObject({
      state: "failed",
      last_error: { code: "internal_error", message: "llama-server crashed (killed by SIGKILL)" },
      pid: null,
      rss_bytes: null,
      uptime_ms: null,
      restarts: { used: 3, left: 0, next_automatic_try_at: new Date(NOW + 5000).toISOString() },
    });
  });

  test("waking: sleeping, with waking true", () => {
    expect(describeLlama(snap({ sleep: "waking" }), NOW, () => null)).toMatchObject({
      state: "sleeping",
      waking: true,
    });
  });

  test("an unreadable config: the restart limits are null, not an error", () => {
    const s = describeLlama(
      snap({ state: "stopped", restarts: { used: 0, max: null, windowMs: null, nextAutomaticTryAt: null } }),
      NOW,
      () => null,
    );
    expect(s.restarts).toEqual({
      used: 0,
      max: null,
      left: null,
      window_s: null,
      next_automatic_try_at: null,
    });
  });
});

describe("the status method", () => {
  const ctx = (id: string | number, active: { id: string | number; method: string; since: number }[]) =>
    ({ id, activeRequests: () => active }) as unknown as RequestContext;
  const run = async (services: Partial<Services>, c: RequestContext) => {
    const handler = await methodTable(services as Services, { testMethods: false })
      .get("status")!
      .load();
    return handler.run({}, c);
  };

  test("answers at once (a plain value), never creates the supervisor, and lists the requests in flight but itself", async () => {
    let created = false;
    const services: Partial<Services> = {
      existingLlama: () => undefined,
      llama: () => {
        created = true;
        throw new Error("status must not create the supervisor");
      },
      config: () => {
        throw new CoreError("config_invalid", "status must not load the config");
      },
    };
    const t = Date.now();
    const result = await run(
      services,
      ctx("s", [
        { id: "c1", method: "chat", since: t - 1500 },
        { id: 7, method: "pull", since: t - 200 },
        { id: "s", method: "status", since: t },
      ]),
    );
    expect(result).not.toBeInstanceOf(Promise);
    const parsed = statusResultSchema().parse(result);
    expect(created).toBe(false);
    expect(parsed.llama.state).toBe("stopped");
    expect(parsed.llama.slots.total).toBeNull();
    expect(parsed.kv_disk).toEqual({ used_bytes: null, files: null, budget_bytes: null });
    expect(parsed.rpc_workers).toEqual([]);
    expect(parsed.requests.map((r) => [r.id, r.method])).toEqual([
      ["c1", "chat"],
      [7, "pull"],
    ]);
    expect(parsed.requests[0]!.elapsed_ms).toBeGreaterThanOrEqual(1500);
    expect(Date.parse(parsed.requests[0]!.since)).toBe(t - 1500);
    expect(parsed.core.pid).toBe(process.pid);
    expect(parsed.core.rss_bytes).toBeGreaterThan(0);
  });

  test("the KV state saved on disk, as the core counted it (docs/agent.md#prompt-reuse)", async () => {
    const result = statusResultSchema().parse(
      await run(
        {
          existingLlama: () => undefined,
          kvDiskUse: () => ({ bytes: 11_244, files: 1, budget_bytes: 4 * 2 ** 30 }),
        },
        ctx(1, []),
      ),
    );
    expect(result.kv_disk).toEqual({ used_bytes: 11_244, files: 1, budget_bytes: 4 * 2 ** 30 });
    // The first count still under way: its budget, and no partial count taken for the total.
    const counting = await run(
      { existingLlama: () => undefined, kvDiskUse: () => ({ bytes: null, files: null, budget_bytes: 1024 }) },
      ctx(1, []),
    );
    const kv = statusResultSchema().parse(counting).kv_disk;
    expect(kv).toEqual({ used_bytes: null, files: null, budget_bytes: 1024 });
  });

  test('a request with the same id but another type is not this one (1 and "1" are different ids)', async () => {
    const result = statusResultSchema().parse(
      await run({ existingLlama: () => undefined }, ctx(1, [{ id: "1", method: "chat", since: Date.now() }])),
    );
    expect(result.requests.map((r) => r.id)).toEqual(["1"]);
  });

  test("never fails: a snapshot that throws becomes a failed state naming why", async () => {
    const provider = {
      snapshot: () => {
        throw new Error("cannot read config.yaml");
      },
    } as unknown as LlamaProvider;
    const result = statusResultSchema().parse(await run({ existingLlama: () => provider }, ctx("s", [])));
    expect(result.llama.state).toBe("failed");
    expect(result.llama.last_error?.message).toContain("cannot read config.yaml");
  });

  test("configured RPC workers are listed as the worker book last saw them, without a network call", async () => {
    const config = ConfigSchema.parse({ llama: { rpc: ["127.0.0.1:1", "127.0.0.1:2"] } });
    const result = statusResultSchema().parse(
      await run({ existingLlama: () => undefined, existingConfig: () => config }, ctx("s", [])),
    );
    expect(result.rpc_workers.map((w) => [w.endpoint, w.state])).toEqual([
      ["127.0.0.1:1", "unchecked"],
      ["127.0.0.1:2", "unchecked"],
    ]);
  });

  test("lists at most the oldest LISTED_REQUESTS in flight", async () => {
    const active = Array.from({ length: 1000 }, (_, i) => ({ id: i, method: "chat", since: NOW + i }));
    const result = statusResultSchema().parse(await run({ existingLlama: () => undefined }, ctx(0, active)));
    expect(result.requests.length).toBe(LISTED_REQUESTS);
    expect(result.requests[0]?.id).toBe(1);
  });

  test("a provider without a snapshot (a test stand-in) reads as stopped", async () => {
    const result = statusResultSchema().parse(
      await run({ existingLlama: () => ({}) as LlamaProvider }, ctx("s", [])),
    );
    expect(result.llama.state).toBe("stopped");
  });

  test("with several models and `default` unloaded, the llama object's out-of-memory count is its row's", async () => {
    const row = { name: "default", gpu_out_of_memory: 2 };
    const several = {
      status: () => ({ models: [row], memory: [] }),
      supervisorSnapshot: () => undefined,
      failure: () => undefined,
    };
    const result = await run(
      { existingLlama: () => undefined, models: () => several as never } as Partial<Services>,
      ctx("s", []),
    );
    expect((result as { llama: { state: string; gpu_out_of_memory: number } }).llama).toMatchObject({
      state: "stopped",
      gpu_out_of_memory: 2,
    });
  });

  // A one-model host reads `llama`: with a models list, a `default` that failed to load said
  // `stopped` with no error, as if it had never been asked for.
  test("with several models and `default` failed, the llama object says failed with its error", async () => {
    const row = { name: "default", gpu_out_of_memory: 0 };
    const failure = { code: "model_missing" as const, message: "model.path: /m.gguf does not exist" };
    const several = {
      status: () => ({ models: [row], memory: [] }),
      supervisorSnapshot: () => undefined,
      failure: (name: string) => (name === "default" ? failure : undefined),
    };
    const result = (await run(
      { existingLlama: () => undefined, models: () => several as never } as Partial<Services>,
      ctx("s", []),
    )) as { llama: Record<string, unknown> };
    expect(result.llama).toMatchObject({ state: "failed", last_error: failure, pid: null });
  });

  test("the model section's vision is its last plan's: true with a projector, null before any plan", async () => {
    const withSnap = (model: Partial<SupervisorSnapshot["model"]> | null) =>
      ({
        snapshot: () => (model ? snap({ model: { ...snap().model, ...model } }) : undefined),
      }) as unknown as LlamaProvider;
    const vision = async (model: Partial<SupervisorSnapshot["model"]> | null) =>
      statusResultSchema().parse(await run({ existingLlama: () => withSnap(model) }, ctx("s", [])))
        .models![0]!.vision;
    expect(await vision({ vision: true })).toBe(true);
    expect(await vision({ vision: false })).toBe(false);
    expect(await vision(null)).toBeNull();
  });
});
