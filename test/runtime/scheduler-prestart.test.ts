import { describe, expect, test } from "bun:test";
import { Scheduler } from "../../src/runtime/scheduler.ts";
import { FakeFleet, type FakeSpec, signal } from "./helpers/fake-model-runtime.ts";
import { FakeTimers, settle } from "./helpers/fake-timers.ts";

// A chat's load begun on its arrival (scheduler.ts `prestart`; docs/performance.md "Several
// models"): the swap's steps run while the turn prepares, and the chat's acquire joins that load.

function setup(specs: Record<string, FakeSpec>) {
  const fleet = new FakeFleet(specs);
  const scheduler = new Scheduler({
    runtime: fleet.runtime,
    settings: () => ({ loadWaitMs: 120_000, idleUnloadMs: 0 }),
    configured: () => Object.keys(specs).map((name) => ({ name, pinned: false })),
    cancelChats: () => {},
    timers: new FakeTimers(),
  });
  const state = (name: string) => scheduler.snapshot().models.find((m) => m.name === name)?.state;
  return { fleet, scheduler, state };
}

describe("Scheduler: prestart", () => {
  test("begins an unloaded model's load (the swap included) before any acquire; the acquire joins it", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6, gated: true } });
    (await scheduler.acquire("a", signal())).release();
    const ticket = scheduler.prestart("b");
    expect(ticket).toBeDefined();
    await ticket?.spawned;
    // Admitted: a saved and stopped first, then b's start began (memory-fit, never both).
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
    expect(state("b")).toBe("loading");
    const lease = scheduler.acquire("b", signal());
    fleet.last("b").open();
    (await lease).release();
    expect(fleet.made.get("b")?.length).toBe(1);
    expect(state("b")).toBe("loaded");
  });

  test("nothing for a model loaded or failed, nor after stop", async () => {
    const { fleet, scheduler } = setup({
      a: { gib: 2 },
      bad: { gib: 2, fail: new Error("it does not start") },
    });
    (await scheduler.acquire("a", signal())).release();
    expect(scheduler.prestart("a")).toBeUndefined();
    await scheduler.acquire("bad", signal()).catch(() => {});
    expect(scheduler.prestart("bad")).toBeUndefined();
    await scheduler.stop();
    await settle();
    expect(scheduler.prestart("a")).toBeUndefined();
    expect(fleet.made.get("a")?.length).toBe(1);
  });

  test("a chat that ends before it asks drops the load it began while that still waits for room", async () => {
    // Its chat cancelled while the turn prepared (a session lock, say): nobody waits for the load,
    // which would otherwise wait out load_wait_s, then unload the busy model once idle, for nobody.
    const { fleet, scheduler, state } = setup({ a: { gib: 6 }, b: { gib: 6 } });
    const a = await scheduler.acquire("a", signal());
    const release = scheduler.claim("b");
    scheduler.prestart("b");
    await settle();
    expect(state("b")).toBe("loading");
    release();
    await settle();
    expect(state("b")).toBe("unloaded");
    a.release();
    await settle();
    expect(state("a")).toBe("loaded");
    // b's runtime, made for the plan, is closed; it never started, and a was never unloaded.
    expect(fleet.log).toEqual(["a.start", "b.stop"]);
  });

  test("one admitted goes on: the model stays loaded, as a supervisor's prestart leaves its server started", async () => {
    const { fleet, scheduler, state } = setup({ a: { gib: 2 }, b: { gib: 2, gated: true } });
    const release = scheduler.claim("b");
    await scheduler.prestart("b")?.spawned;
    release();
    fleet.last("b").open();
    await settle();
    expect(state("b")).toBe("loaded");
  });
});
