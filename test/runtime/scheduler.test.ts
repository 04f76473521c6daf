import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import type { SchedulerProgress, SchedulerSettings } from "../../src/runtime/model-runtime.ts";
import { Scheduler } from "../../src/runtime/scheduler.ts";
import { FakeFleet, type FakeSpec, signal } from "./helpers/fake-model-runtime.ts";
import { FakeTimers, settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";

const GIB = 1024 ** 3;

/** A scheduler over fake runtimes on a 10 GiB gpu0, with a fake clock. */
function setup(
  specs: Record<string, FakeSpec>,
  over: Partial<SchedulerSettings> & { pinned?: string[] } = {},
) {
  const fleet = new FakeFleet(specs);
  const timers = new FakeTimers();
  const cancelled: string[] = [];
  const settings = { loadWaitMs: 120_000, idleUnloadMs: 0, ...over };
  const scheduler = new Scheduler({
    runtime: fleet.runtime,
    settings: () => settings,
    configured: () =>
      Object.keys(specs).map((name) => ({ name, pinned: over.pinned?.includes(name) ?? false })),
    cancelChats: (m) => cancelled.push(m),
    timers,
  });
  const state = (name: string) => scheduler.snapshot().models.find((m) => m.name === name)?.state;
  return { fleet, timers, scheduler, cancelled, state };
}

/** Model `a`, used once, now in its idle unload (idle_unload_s), its save held until `save` resolves. */
async function idleUnloadSaving() {
  const save = Promise.withResolvers<void>();
  const { fleet, timers, scheduler, state } = setup({ a: { gib: 2 } }, { idleUnloadMs: 1000 });
  const pinned = () => scheduler.snapshot().models.find((m) => m.name === "a")?.pinned;
  (await scheduler.acquire("a", signal())).release();
  fleet.spec("a").saveGate = save.promise;
  await timers.advance(1000);
  expect(state("a")).toBe("unloading");
  return { fleet, scheduler, state, pinned, save };
}

describe("Scheduler: loads", () => {
  test("concurrent requests for a loading model share one load", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 4, gated: true } });
    const one = scheduler.acquire("a", signal());
    const two = scheduler.acquire("a", signal());
    await settle();
    expect(state("a")).toBe("loading");
    fleet.last("a").open();
    const [l1, l2] = await Promise.all([one, two]);
    expect(fleet.made.get("a")?.length).toBe(1);
    expect(fleet.log).toEqual(["a.start"]);
    expect(l1.model).toBe("a");
    expect(fleet.last("a").leases).toBe(2);
    l1.release();
    l2.release();
    expect(state("a")).toBe("loaded");
  });

  test("the load takes no slot of its own: the chat's lease is the only one handed out", async () => {
    // A lease costs a listen check on the fresh server (supervisor.ts `usable`), on a swap's path.
    const { fleet, scheduler } = setup({ a: { gib: 4 } });
    const lease = await scheduler.acquire("a", signal());
    expect(fleet.log).toEqual(["a.start"]);
    expect(fleet.last("a").taken).toBe(1);
    lease.release();
    await scheduler.load("a");
    expect(fleet.last("a").taken).toBe(1);
  });

  test("a swap: the save's own part on disk waits for the stop (it slowed the exit beside it)", async () => {
    const { fleet, scheduler } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    (await scheduler.acquire("a", signal())).release();
    const b = await scheduler.acquire("b", signal());
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
    expect(fleet.last("a").keptAfterStop).toBe(true);
    b.release();
  });

  test("a swap: the idle model's sessions are saved, then it stops, then the other starts", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    (await scheduler.acquire("a", signal())).release();
    const b = await scheduler.acquire("b", signal());
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
    expect(state("a")).toBe("unloaded");
    expect(state("b")).toBe("loaded");
    // Made room for: done once a's memory is given back, not once its exit is reported.
    expect(fleet.last("a").stops).toEqual([true]);
    b.release();
  });

  test("models that fit together stay loaded together, however many", async () => {
    const { fleet, scheduler } = setup({ a: { gib: 2 }, b: { gib: 2 }, c: { gib: 2 }, d: { gib: 2 } });
    for (const m of ["a", "b", "c", "d"]) (await scheduler.acquire(m, signal())).release();
    expect(fleet.log.filter((l) => l.endsWith(".stop"))).toEqual([]);
    expect(scheduler.snapshot().memory).toEqual([
      { device: "gpu0", budget_bytes: 10 * GIB, planned_bytes: 8 * GIB },
    ]);
  });

  test("two loads deciding at once never both take the same room", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6, gated: true }, b: { gib: 6 } });
    const a = scheduler.acquire("a", signal());
    const b = scheduler.acquire("b", signal());
    await settle();
    expect(state("a")).toBe("loading");
    expect(state("b")).toBe("loading");
    expect(fleet.log).toEqual(["a.start"]);
    fleet.last("a").open();
    (await a).release();
    (await b).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
  });

  test("a model that cannot fit even alone: model_plan_error naming the device, nothing unloaded", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 2 }, huge: { gib: 11 } });
    (await scheduler.acquire("a", signal())).release();
    const err = await rejection(scheduler.acquire("huge", signal()));
    expect(err.code).toBe("model_plan_error");
    expect(err.message).toContain("gpu0");
    expect(state("a")).toBe("loaded");
    expect(state("huge")).toBe("failed");
    expect(fleet.log.filter((l) => l.startsWith("a."))).toEqual(["a.start"]);
  });
});

/** `b` waiting behind `a`, load_wait_s 2 s: heard every 250 ms, then model_plan_error naming `a`. */
async function givesUpAt2s(
  timers: FakeTimers,
  state: (name: string) => string | undefined,
  b: Promise<CoreError>,
  heard: SchedulerProgress[],
): Promise<void> {
  await timers.advance(1999);
  expect(state("b")).toBe("loading");
  expect(heard.length).toBeGreaterThanOrEqual(8);
  expect(heard.at(-1)).toMatchObject({ phase: "waiting_for_memory", models: ["a"], elapsed_ms: 1750 });
  await timers.advance(1);
  const err = await b;
  expect(err.code).toBe("model_plan_error");
  expect(err.data?.holders).toEqual(["a"]);
  expect(err.message).toContain('"a"');
}

describe("Scheduler: waiting for memory", () => {
  test("a busy model is waited for, and the load goes ahead when its chat releases it", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    const a = await scheduler.acquire("a", signal());
    const heard: SchedulerProgress[] = [];
    const b = scheduler.acquire("b", signal(), (p) => heard.push(p));
    await settle();
    expect(heard[0]).toEqual({ phase: "waiting_for_memory", models: ["a"], elapsed_ms: 0 });
    expect(state("a")).toBe("loaded");
    a.release();
    (await b).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
  });

  test("the wait repeats its progress and ends in model_plan_error naming the holders after load_wait_s", async () => {
    const { timers, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } }, { loadWaitMs: 2000 });
    const a = await scheduler.acquire("a", signal());
    const heard: SchedulerProgress[] = [];
    const b = rejection(scheduler.acquire("b", signal(), (p) => heard.push(p)));
    await givesUpAt2s(timers, state, b, heard);
    expect(state("a")).toBe("loaded");
    a.release();
  });

  /** `a` admitted and starting until opened, `b` asked for behind it; load_wait_s 2 s. */
  async function behindALoad(gib: number) {
    const t = setup({ a: { gib, gated: true }, b: { gib } }, { loadWaitMs: 2000 });
    const a = t.scheduler.acquire("a", signal());
    await settle();
    expect(t.state("a")).toBe("loading"); // admitted, its server starting for as long as it takes
    const heard: SchedulerProgress[] = [];
    const b = rejection(t.scheduler.acquire("b", signal(), (p) => heard.push(p)));
    return { ...t, a, b, heard };
  }

  test("a wait behind another model's load under way (a long start) is bounded by load_wait_s too", async () => {
    const { fleet, timers, state, a, b, heard } = await behindALoad(4);
    await givesUpAt2s(timers, state, b, heard);
    expect(fleet.last("b").plans).toBe(0);
    fleet.last("a").open();
    (await a).release();
    expect(state("a")).toBe("loaded");
    expect(fleet.log).toEqual(["a.start", "b.stop"]); // b's runtime, never started, closed
  });

  test("the wait behind another model's load counts toward load_wait_s with the wait for room after it", async () => {
    const { fleet, timers, state, a, b, heard } = await behindALoad(6);
    await timers.advance(1500);
    fleet.last("a").open();
    const chatOnA = await a; // a loaded and busy: b now waits for its room
    await timers.advance(499);
    expect(state("b")).toBe("loading");
    expect(heard.at(-1)).toMatchObject({ phase: "waiting_for_memory", models: ["a"] });
    expect(heard.at(-1)?.elapsed_ms).toBeGreaterThanOrEqual(1500);
    await timers.advance(1);
    const err = await b;
    expect(err.code).toBe("model_plan_error");
    expect(err.data?.holders).toEqual(["a"]);
    chatOnA.release();
  });

  test("a cancel while waiting ends the wait at once; the load is dropped, not failed", async () => {
    const { scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    const a = await scheduler.acquire("a", signal());
    const ctl = new AbortController();
    const b = rejection(scheduler.acquire("b", ctl.signal));
    await settle();
    ctl.abort(new CoreError("cancelled", "the chat was cancelled"));
    expect((await b).message).toBe("the chat was cancelled");
    await settle();
    expect(state("b")).toBe("unloaded");
    a.release();
    expect(state("a")).toBe("loaded");
  });

  test("a pinned model is never unloaded to make room", async () => {
    const { timers, scheduler, state } = setup(
      { a: { gib: 6 }, b: { gib: 6 } },
      { pinned: ["a"], loadWaitMs: 500 },
    );
    (await scheduler.acquire("a", signal())).release();
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(500);
    const err = await b;
    expect(err.data?.holders).toEqual(["a"]);
    expect(state("a")).toBe("loaded");
  });
});

describe("Scheduler: unload", () => {
  test("a busy model is refused with model_busy; forced, its chats are cancelled and it stops", async () => {
    const { fleet, scheduler, cancelled, state } = setup({ a: { gib: 2 } });
    const lease = await scheduler.acquire("a", signal());
    const err = await rejection(scheduler.unload("a"));
    expect(err.code).toBe("invalid_request");
    expect((err.data as Record<string, unknown>).reason).toBe("model_busy");
    expect(state("a")).toBe("loaded");
    expect(cancelled).toEqual([]);
    await scheduler.unload("a", { force: true });
    expect(cancelled).toEqual(["a"]);
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop"]);
    expect(lease.died.aborted).toBe(true);
    expect(state("a")).toBe("unloaded");
    lease.release(); // the cancelled chat lets go afterwards: nothing breaks
    expect(scheduler.snapshot().models.find((m) => m.name === "a")?.chats).toBe(0);
  });

  test("an idle model unloads after its save; a model not loaded or unknown is a clear invalid_request", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 2 }, b: { gib: 2 } });
    (await scheduler.acquire("a", signal())).release();
    await scheduler.unload("a");
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop"]);
    expect(state("a")).toBe("unloaded");
    const notLoaded = await rejection(scheduler.unload("b"));
    expect([notLoaded.code, notLoaded.message]).toEqual(["invalid_request", 'model "b" is not loaded']);
    const unknown = await rejection(scheduler.unload("nope"));
    expect([unknown.code, unknown.message]).toEqual([
      "invalid_request",
      'no model "nope" is configured or loaded',
    ]);
    // models.unload waits for the exit itself: the host may look for the process next.
    expect(fleet.last("a").stops).toEqual([false]);
  });

  test("a swap's save still finds the model's runtime: its prompt reuse asks it whether the server is up", async () => {
    // The prompt reuse's save reads the model's provider, which reads runtimeOf (several-models.ts):
    // while unloading, before its stop, the runtime is still there (issue 28: a swap saved nothing).
    const seen: (string | undefined)[] = [];
    const specs: Record<string, FakeSpec> = { a: { gib: 6 }, b: { gib: 6 } };
    const { fleet, scheduler } = setup(specs);
    (specs.a as FakeSpec).onSave = () => seen.push(scheduler.runtimeOf("a")?.snapshot().state);
    (await scheduler.acquire("a", signal())).release();
    (await scheduler.acquire("b", signal())).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
    expect(seen).toEqual(["ready"]);
    expect(scheduler.runtimeOf("a")).toBeUndefined();
  });

  test("a model loaded again after an unload gets a fresh runtime", async () => {
    const { fleet, scheduler } = setup({ a: { gib: 2 } });
    (await scheduler.acquire("a", signal())).release();
    await scheduler.unload("a");
    (await scheduler.acquire("a", signal())).release();
    expect(fleet.made.get("a")?.length).toBe(2);
    expect(fleet.last("a").stopped).toBe(false);
  });

  test("idle_unload_s: a model unused that long is saved and stopped; a pinned one is kept", async () => {
    const { fleet, timers, scheduler, state } = setup(
      { a: { gib: 2 }, p: { gib: 2 } },
      { idleUnloadMs: 60_000, pinned: ["p"] },
    );
    (await scheduler.acquire("a", signal())).release();
    (await scheduler.acquire("p", signal())).release();
    await timers.advance(30_000);
    (await scheduler.acquire("a", signal())).release(); // used again: the minute starts over
    await timers.advance(59_999);
    expect(state("a")).toBe("loaded");
    await timers.advance(1);
    expect(state("a")).toBe("unloaded");
    expect(fleet.log.filter((l) => l.startsWith("a."))).toEqual(["a.start", "a.save", "a.stop"]);
    await timers.advance(600_000);
    expect(state("p")).toBe("loaded");
  });

  test("idle_unload_s never stops a model while a chat holds it", async () => {
    const { timers, scheduler, state } = setup({ a: { gib: 2 } }, { idleUnloadMs: 1000 });
    const lease = await scheduler.acquire("a", signal());
    await timers.advance(5000);
    expect(state("a")).toBe("loaded");
    lease.release();
    await timers.advance(1000);
    expect(state("a")).toBe("unloaded");
  });

  test("models.unload during an idle unload wins: its pin ends, a pinning load asked before it is cancelled", async () => {
    // As without an unload under way: the host's unload answered ok, so nothing it asked before
    // brings the model back (pinned, never to be unloaded for room). A load asked after it loads.
    const { fleet, scheduler, pinned, save } = await idleUnloadSaving();
    const before = rejection(scheduler.load("a", { pin: true }));
    await settle();
    const unload = scheduler.unload("a");
    await settle();
    const after = scheduler.load("a");
    save.resolve();
    await unload;
    const err = await before;
    expect(err.code).toBe("cancelled");
    expect(err.message).toBe('model "a" was unloaded');
    expect((await after).state).toBe("loaded");
    expect(pinned()).toBe(false);
    expect(fleet.log.filter((l) => l === "a.start")).toHaveLength(2);
  });

  test("a restart that keeps the pin (memory's embedder) leaves a host's pin and a pinning load asked before it", async () => {
    // Not the host's unload: memory's embedder restarting a server whose file changed
    // (memory-embedding.ts). What the host asked stands: its pin, and its load waiting for the
    // idle unload under way, which loads the model back once that unload ends.
    const { scheduler, state, pinned, save } = await idleUnloadSaving();
    const before = scheduler.load("a", { pin: true });
    await settle();
    const restart = scheduler.unload("a", { keepPin: true });
    save.resolve();
    await restart;
    expect((await before).state).toBe("loaded");
    expect(pinned()).toBe(true);
    // Of a loaded, pinned model: unloaded, still pinned; the next request loads it again.
    await scheduler.unload("a", { keepPin: true });
    expect(state("a")).toBe("unloaded");
    expect(pinned()).toBe(true);
  });

  test("a forced unload of a loading model ends the load and the chats waiting on it as cancelled", async () => {
    const { fleet, scheduler, cancelled, state } = setup({ a: { gib: 2, gated: true } });
    const chat = rejection(scheduler.acquire("a", signal()));
    await settle();
    expect((await rejection(scheduler.unload("a"))).code).toBe("invalid_request");
    await scheduler.unload("a", { force: true });
    expect(cancelled).toEqual(["a"]);
    expect((await chat).code).toBe("cancelled");
    expect(fleet.last("a").stopped).toBe(true);
    expect(fleet.log).not.toContain("a.save"); // nothing served yet, nothing to save
    expect(state("a")).toBe("unloaded");
  });

  test("a model pinned by models.load is not unloaded to make room", async () => {
    const { timers, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } }, { loadWaitMs: 1000 });
    await scheduler.load("a", { pin: true });
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(1000);
    expect((await b).code).toBe("model_plan_error");
    expect(state("a")).toBe("loaded");
  });

  test("a models.load with pin that fails pins nothing: the model's next load by a chat can be unloaded for room", async () => {
    const { timers, scheduler } = setup({ a: { gib: 6 }, b: { gib: 6 } }, { loadWaitMs: 1000 });
    const chatOnB = await scheduler.acquire("b", signal());
    const load = rejection(scheduler.load("a", { pin: true }));
    await timers.advance(1000);
    expect((await load).code).toBe("model_plan_error");
    const row = () => scheduler.snapshot().models.find((m) => m.name === "a");
    expect(row()?.pinned).toBe(false);
    chatOnB.release();
    (await scheduler.acquire("a", signal())).release();
    expect(row()?.pinned).toBe(false);
    // b's chat makes room by unloading a, as for any model the host never pinned.
    (await scheduler.acquire("b", signal())).release();
    expect(row()?.state).toBe("unloaded");
  });

  test("models.load loads with no chat, pins, and reports the planned bytes", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 2 } });
    expect(await scheduler.load("a", { pin: true })).toEqual({
      model: "a",
      state: "loaded",
      memory_bytes: 2 * GIB,
    });
    expect(state("a")).toBe("loaded");
    expect(fleet.last("a").leases).toBe(0);
    expect(scheduler.snapshot().models[0]?.pinned).toBe(true);
  });
});

describe("Scheduler: failures and shutdown", () => {
  test("a failed start fails that model alone: one error to its waiters, the other model untouched", async () => {
    const boom = new CoreError("model_missing", "b.gguf is gone");
    const { fleet, scheduler, state } = setup({ a: { gib: 2 }, b: { gib: 2, gated: true, fail: boom } });
    const a = await scheduler.acquire("a", signal());
    const w1 = rejection(scheduler.acquire("b", signal()));
    const w2 = rejection(scheduler.acquire("b", signal()));
    await settle();
    fleet.last("b").open();
    expect(await w1).toBe(boom);
    expect(await w2).toBe(boom);
    expect(state("b")).toBe("failed");
    expect(scheduler.snapshot().models.find((m) => m.name === "b")?.error).toBe(boom);
    expect(state("a")).toBe("loaded");
    expect(a.died.aborted).toBe(false);
    expect(fleet.log.filter((l) => l.startsWith("a."))).toEqual(["a.start"]);
    a.release();
  });

  test("a failed model loads again on the next request", async () => {
    const { fleet, scheduler, state } = setup({ b: { gib: 2, fail: new CoreError("internal_error", "no") } });
    await rejection(scheduler.acquire("b", signal()));
    delete fleet.spec("b").fail;
    (await scheduler.acquire("b", signal())).release();
    expect(state("b")).toBe("loaded");
    expect(fleet.made.get("b")?.length).toBe(2);
  });

  test("an unknown name fails its caller alone and leaves nothing behind", async () => {
    const { scheduler } = setup({ a: { gib: 2 } });
    await expect(scheduler.acquire("nope", signal())).rejects.toThrow("no fake model nope");
    expect(scheduler.snapshot().models.map((m) => m.name)).toEqual(["a"]);
  });

  test("stop during a load ends the load as cancelled and stops its runtime; later loads are refused", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 2 }, b: { gib: 2, gated: true } });
    const a = await scheduler.acquire("a", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await settle();
    await scheduler.stop();
    expect((await b).code).toBe("cancelled");
    expect(fleet.last("b").stopped).toBe(true);
    expect(fleet.last("a").stopped).toBe(true);
    expect(a.died.aborted).toBe(true);
    expect(fleet.log).not.toContain("a.save"); // prompt reuse saved at its own stop, before this
    expect([state("a"), state("b")]).toEqual(["unloaded", "unloaded"]);
    expect((await rejection(scheduler.acquire("a", signal()))).code).toBe("cancelled");
    expect((await rejection(scheduler.load("a"))).code).toBe("cancelled");
    a.release();
  });

  test("a load waiting for room as shutdown begins ends then, cancelled: it neither evicts nor starts while the last saves run", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    const chatOnA = await scheduler.acquire("a", signal());
    const load = rejection(scheduler.load("b"));
    await settle();
    expect(state("b")).toBe("loading");
    const saves = Promise.withResolvers<void>();
    const stopping = scheduler.stop(() => saves.promise);
    chatOnA.release(); // shutdown cancels the chats: a's room is free while the saves run
    expect((await load).code).toBe("cancelled");
    await settle();
    // Nothing of b's load went on: a was not saved and stopped for it, b's server never started.
    expect(fleet.log).toEqual(["a.start", "b.stop"]);
    saves.resolve();
    await stopping;
    expect(fleet.log).toEqual(["a.start", "b.stop", "a.stop"]);
    expect([state("a"), state("b")]).toEqual(["unloaded", "unloaded"]);
  });

  test("a load ended by shutdown while it made room starts nothing once the room is made", async () => {
    const saveGate = Promise.withResolvers<void>();
    const { fleet, scheduler, state } = setup({ a: { gib: 6, saveGate: saveGate.promise }, b: { gib: 6 } });
    (await scheduler.acquire("a", signal())).release();
    const load = rejection(scheduler.load("b"));
    await settle();
    expect(fleet.log).toEqual(["a.start", "a.save"]); // b evicts a: its save is under way
    const stopping = scheduler.stop();
    saveGate.resolve();
    expect((await load).code).toBe("cancelled");
    await stopping;
    expect(fleet.log).not.toContain("b.start");
    expect([state("a"), state("b")]).toEqual(["unloaded", "unloaded"]);
  });
});

describe("Scheduler: races", () => {
  test("a chat arriving for the idle model before a swap decides keeps it: the swap waits for it", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    (await scheduler.acquire("a", signal())).release();
    const b = scheduler.acquire("b", signal());
    const a = await scheduler.acquire("a", signal()); // before b's plan came back
    await settle();
    expect(state("a")).toBe("loaded");
    expect(state("b")).toBe("loading");
    expect(fleet.log).toEqual(["a.start"]);
    a.release();
    (await b).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
  });

  test("a chat arriving for a model being swapped out waits for the swap, then for room", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6, gated: true } });
    (await scheduler.acquire("a", signal())).release();
    const b = scheduler.acquire("b", signal());
    await settle();
    expect(state("a")).toBe("unloaded");
    const heard: SchedulerProgress[] = [];
    const a = scheduler.acquire("a", signal(), (p) => heard.push(p));
    await settle();
    expect(heard[0]).toMatchObject({ phase: "waiting_for_memory", models: ["b"] });
    fleet.last("b").open();
    (await b).release();
    (await a).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start", "b.save", "b.stop", "a.start"]);
  });
});

describe("Scheduler: snapshot", () => {
  test("every configured model, its state, pid, pin, planned bytes, slots and last use; memory per device", async () => {
    const { timers, scheduler } = setup({ a: { gib: 2 }, b: { gib: 3 } }, { pinned: ["b"] });
    const lease = await scheduler.acquire("a", signal());
    const snap = scheduler.snapshot();
    expect(snap.models).toEqual([
      {
        name: "a",
        state: "loaded",
        pinned: false,
        pid: 100,
        memory_bytes: 2 * GIB,
        slots: { busy: 1, waiting: 0, total: 2 },
        chats: 1,
        last_used_at: timers.now(),
        error: null,
      },
      {
        name: "b",
        state: "unloaded",
        pinned: true,
        pid: null,
        memory_bytes: null,
        slots: null,
        chats: 0,
        last_used_at: null,
        error: null,
      },
    ]);
    expect(snap.memory).toEqual([{ device: "gpu0", budget_bytes: 10 * GIB, planned_bytes: 2 * GIB }]);
    lease.release();
  });
});
