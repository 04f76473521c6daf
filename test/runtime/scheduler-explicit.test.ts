import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { type FakeRuntime, signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A start the host asked for (`warmup`, through the default model's provider when the core runs
// several models): as with one model, it restarts at once whatever the restart budget, and a
// cancel stops its wait, not the load (docs/protocol.md#warmup).

describe("Scheduler: an explicit acquire (warmup)", () => {
  test("restarts a model whose server died at once, even with the restart budget spent", async () => {
    const spent = new CoreError("internal_error", "not restarting it; a warmup tries again at once");
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 6, restartFails: spent } });
    (await scheduler.acquire("a", signal())).release();
    fleet.last("a").crash();
    (await scheduler.acquire("a", signal(), undefined, { explicit: true })).release();
    expect(row("a")?.state).toBe("loaded");
    expect(fleet.log).toEqual(["a.start", "a.restart"]);
  });

  test("one that joins a chat's load while its hold is checked starts the model, not the held error", async () => {
    // Before admission the load asks whether its start is held (a start that failed of late): a
    // warmup or models.load that joins meanwhile is the host asking, tried at once as at launch.
    const held = new CoreError("internal_error", "it failed a moment ago (not tried again before …)");
    const gate = Promise.withResolvers<void>();
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 2, held, holdGate: gate.promise } });
    const chat = scheduler.acquire("a", signal());
    await settle();
    const load = scheduler.load("a");
    gate.resolve();
    expect((await load).state).toBe("loaded");
    expect(row("a")?.state).toBe("loaded");
    expect(fleet.log).toEqual(["a.start"]);
    (await chat).release();
  });

  test("cancelled while it waits for memory: the wait stops, the load goes on", async () => {
    const { scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } });
    const a = await scheduler.acquire("a", signal());
    const ctl = new AbortController();
    const warm = rejection(scheduler.acquire("b", ctl.signal, undefined, { explicit: true }));
    await settle();
    ctl.abort(new CoreError("cancelled", "cancelled by the host"));
    expect((await warm).code).toBe("cancelled");
    await settle();
    expect(row("b")?.state).toBe("loading");
    a.release();
    await settle();
    expect(row("b")?.state).toBe("loaded");
  });
});

describe("Scheduler: models.load's pin", () => {
  test("holds until models.unload of the model; the next load is unpinned, as the config says", async () => {
    const { scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } });
    await scheduler.load("a", { pin: true });
    expect(row("a")?.pinned).toBe(true);
    await scheduler.unload("a");
    expect(row("a")).toMatchObject({ state: "unloaded", pinned: false });
    (await scheduler.acquire("a", signal())).release();
    expect(row("a")?.pinned).toBe(false);
    // Unpinned, it makes room for another model.
    (await scheduler.acquire("b", signal())).release();
    expect(row("a")?.state).toBe("unloaded");
    expect(row("b")?.state).toBe("loaded");
  });

  test("two loads at once, one pinning, that fail together pin nothing, whichever ends first", async () => {
    // The second load saw the first's pin as the one before it, and gave it back on failure.
    const fail = new CoreError("internal_error", "it did not start");
    for (const pins of [
      [true, undefined],
      [undefined, true],
      [true, false],
    ] as const) {
      const { scheduler, row } = schedulerOver({ a: { gib: 2, fail } });
      const loads = pins.map((pin) => rejection(scheduler.load("a", pin === undefined ? {} : { pin })));
      for (const l of loads) expect(await l).toBe(fail);
      expect(row("a")).toMatchObject({ state: "failed", pinned: false });
    }
  });

  test("a pinning load cancelled while it goes on pins the model once it loads, and nothing if it fails", async () => {
    const fail = new CoreError("internal_error", "it did not start");
    for (const spec of [
      { gib: 2, gated: true },
      { gib: 2, gated: true, fail },
    ]) {
      const { fleet, scheduler, row } = schedulerOver({ a: spec });
      const ctl = new AbortController();
      const load = rejection(scheduler.load("a", { pin: true, signal: ctl.signal }));
      await settle();
      ctl.abort(new CoreError("cancelled", "cancelled by the host"));
      expect((await load).code).toBe("cancelled");
      expect(row("a")).toMatchObject({ state: "loading", pinned: true });
      fleet.last("a").open();
      await settle();
      expect(row("a")).toMatchObject(
        spec.fail ? { state: "failed", pinned: false } : { state: "loaded", pinned: true },
      );
    }
  });

  test("a pinning load of a loaded model whose server's restart fails pins nothing", async () => {
    // A chat's lease is out as its server dies: the model stays loaded, the load restarts it.
    const fail = new CoreError("internal_error", "it did not start again");
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 2 } });
    const chat = await scheduler.acquire("a", signal());
    fleet.last("a").crash();
    fleet.spec("a").fail = fail;
    expect(await rejection(scheduler.load("a", { pin: true }))).toBe(fail);
    expect(row("a")?.pinned).toBe(false);
    chat.release();
  });

  test("a pinning load that succeeded keeps its pin when another pinning load beside it then fails", async () => {
    // Both wait on the loaded model's restart (a chat's lease is out as its server dies): the
    // first's wait ends served; the server dies again and the second's restart fails.
    const fail = new CoreError("internal_error", "it did not start again");
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 2 } });
    const chat = await scheduler.acquire("a", signal());
    const rt = fleet.last("a");
    rt.crash();
    const gates = gatedReady(rt);
    const first = scheduler.load("a", { pin: true });
    const second = rejection(scheduler.load("a", { pin: true }));
    await settle();
    gates[0]?.resolve();
    expect((await first).state).toBe("loaded");
    expect(row("a")?.pinned).toBe(true);
    rt.crash();
    fleet.spec("a").fail = fail;
    gates[1]?.resolve();
    expect(await second).toBe(fail);
    expect(row("a")?.pinned).toBe(true);
    chat.release();
  });

  test("a pinning load cancelled while a loaded model's restart goes on pins nothing if that restart fails", async () => {
    const fail = new CoreError("internal_error", "it did not start again");
    for (const fails of [true, false]) {
      const { fleet, scheduler, row } = schedulerOver({ a: { gib: 2 } });
      const chat = await scheduler.acquire("a", signal());
      fleet.last("a").crash();
      fleet.spec("a").gated = true;
      const ctl = new AbortController();
      const load = rejection(scheduler.load("a", { pin: true, signal: ctl.signal }));
      await settle();
      ctl.abort(new CoreError("cancelled", "cancelled by the host"));
      expect((await load).code).toBe("cancelled");
      expect(row("a")?.pinned).toBe(true);
      if (fails) fleet.spec("a").fail = fail;
      fleet.last("a").open();
      await settle();
      expect(row("a")?.pinned).toBe(!fails);
      chat.release();
    }
  });

  test("an unload refused while a chat holds the model keeps the pin", async () => {
    const { scheduler, row } = schedulerOver({ a: { gib: 2 } });
    await scheduler.load("a", { pin: true });
    const lease = await scheduler.acquire("a", signal());
    expect((await rejection(scheduler.unload("a"))).data?.reason).toBe("model_busy");
    expect(row("a")?.pinned).toBe(true);
    lease.release();
  });
});

/** Each `ready` call on `rt` from now waits for its own gate (in call order) before it runs. */
function gatedReady(rt: FakeRuntime): PromiseWithResolvers<void>[] {
  const gates: PromiseWithResolvers<void>[] = [];
  const ready = rt.ready.bind(rt);
  rt.ready = async (...args) => {
    const gate = Promise.withResolvers<void>();
    gates.push(gate);
    await gate.promise;
    return ready(...args);
  };
  return gates;
}

/** A models.load waiting on a loaded model's gated restart, its last chat ended: free to unload. */
async function loadAwaitingRestart() {
  // The real supervisor's stop tells a caller waiting on its start "the core is shutting down".
  const { fleet, scheduler, row } = schedulerOver({ a: { gib: 2 } });
  const chat = await scheduler.acquire("a", signal());
  fleet.last("a").crash();
  fleet.spec("a").gated = true;
  const load = rejection(scheduler.load("a"));
  await settle();
  chat.release();
  return { fleet, scheduler, row, load };
}

describe("Scheduler: models.load of a loaded model whose server is down", () => {
  test("a load of a loaded model unloaded while its server restarts says so", async () => {
    const { scheduler, row, load } = await loadAwaitingRestart();
    await scheduler.unload("a");
    const err = await load;
    expect(err.code).toBe("cancelled");
    expect(err.message).toBe('model "a" was unloaded while the request waited for it');
    expect(row("a")?.state).toBe("unloaded");
  });

  test("one whose restart fails, seen failed by a status meanwhile, is told the restart's error", async () => {
    const fail = new CoreError("internal_error", "it did not start again");
    const { fleet, row, load } = await loadAwaitingRestart();
    fleet.last("a").crash(); // the restarted server dies as it starts
    expect(row("a")?.state).toBe("failed"); // a host's status poll meanwhile
    fleet.spec("a").fail = fail;
    fleet.last("a").open();
    expect(await load).toBe(fail);
  });

  test("a pinning load asked while an unload saves keeps its pin when a load from before the unload then fails", async () => {
    // The first load, still waiting on the restart the unload ends, gave the pin back to what it
    // was before it, over the pin the load asked after the unload set.
    const save = Promise.withResolvers<void>();
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 2 } });
    const chat = await scheduler.acquire("a", signal());
    fleet.last("a").crash();
    fleet.spec("a").gated = true;
    const first = rejection(scheduler.load("a", { pin: true }));
    await settle();
    chat.release();
    fleet.spec("a").gated = false;
    fleet.spec("a").saveGate = save.promise;
    const unload = scheduler.unload("a");
    await settle();
    const second = scheduler.load("a", { pin: true });
    save.resolve();
    await unload;
    expect((await first).code).toBe("cancelled");
    expect((await second).state).toBe("loaded");
    expect(row("a")).toMatchObject({ state: "loaded", pinned: true });
  });

  test("one stopped by the core's shutdown is told the core is shutting down, not of an unload", async () => {
    const { scheduler, load } = await loadAwaitingRestart();
    await scheduler.stop();
    const err = await load;
    expect(err.code).toBe("cancelled");
    expect(err.message).toBe("the model cannot load: the core is shutting down");
  });
});
