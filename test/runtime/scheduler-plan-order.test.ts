import { describe, expect, test } from "bun:test";
import type { ModelFootprint, SchedulerProgress } from "../../src/runtime/model-runtime.ts";
import { Scheduler } from "../../src/runtime/scheduler.ts";
import { FakeFleet, type FakeRuntime, signal } from "./helpers/fake-model-runtime.ts";
import { FakeTimers, settle } from "./helpers/fake-timers.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A plan reads the memory free on the devices and adds back what the other models hold: made
// while another model's admitted load is still starting, it would count that model's memory as
// free and as held, twice (docs/supervisor.md "Scheduling several models").

describe("Scheduler: a load plans once the admitted loads under way have ended", () => {
  test("the second model's plan waits for the first's start, hearing waiting_for_memory; then both load", async () => {
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 4, gated: true }, b: { gib: 4 } });
    const a = scheduler.acquire("a", signal());
    await settle();
    expect(row("a")?.state).toBe("loading");
    const heard: SchedulerProgress[] = [];
    const b = scheduler.acquire("b", signal(), (p) => heard.push(p));
    await settle();
    expect(fleet.last("b").plans).toBe(0);
    expect(heard[0]).toMatchObject({ phase: "waiting_for_memory", models: ["a"] });
    fleet.last("a").open();
    (await a).release();
    (await b).release();
    expect(fleet.last("b").plans).toBe(1);
    expect(fleet.log).toEqual(["a.start", "b.start"]);
    expect(row("a")?.state).toBe("loaded");
  });

  test("a load that fails ends the wait too", async () => {
    const boom = new Error("a cannot start");
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 4, fail: boom }, b: { gib: 4 } });
    const a = scheduler.acquire("a", signal()).catch((e: unknown) => e);
    const b = scheduler.acquire("b", signal());
    expect(await a).toBe(boom);
    (await b).release();
    expect(row("b")?.state).toBe("loaded");
    expect(fleet.last("b").plans).toBe(1);
  });

  test("a load not yet admitted is not waited for: two loads plan side by side", async () => {
    const { fleet, scheduler } = schedulerOver({ a: { gib: 4 }, b: { gib: 4 } });
    const both = Promise.all([scheduler.acquire("a", signal()), scheduler.acquire("b", signal())]);
    for (const lease of await both) lease.release();
    expect([fleet.last("a").plans, fleet.last("b").plans]).toEqual([1, 1]);
  });

  test("a plan under way as another load is admitted is made again: that load's memory, free when it read the device, is not also added back", async () => {
    const GIB = 1024 ** 3;
    // 6 GiB each on a 10 GiB gpu0: never both. `a` takes its memory from its start on.
    const fleet = new FakeFleet({ a: { gib: 6, gated: true }, b: { gib: 6 } });
    let scheduler: Scheduler | undefined;
    const firstPlan = Promise.withResolvers<void>();
    const runtime = (name: string): FakeRuntime => {
      const r = fleet.runtime(name);
      if (name !== "b") return r;
      // As model-runtime.ts's plan (planDepsBeside): the device read when the plan begins, what
      // the others hold added back when the probe has answered.
      r.plannedBytes = async (): Promise<ModelFootprint> => {
        r.plans++;
        const free = (fleet.log.includes("a.start") ? 4 : 10) * GIB;
        if (r.plans === 1) await firstPlan.promise;
        const held = (scheduler as Scheduler).heldByOthers("b").reduce((n, d) => n + (d.gpu0 ?? 0), 0);
        return { bytes: { gpu0: 6 * GIB }, budget: { gpu0: free + held } };
      };
      return r;
    };
    scheduler = new Scheduler({
      runtime,
      settings: () => ({ loadWaitMs: 120_000, idleUnloadMs: 0 }),
      configured: () => [
        { name: "a", pinned: false },
        { name: "b", pinned: false },
      ],
      cancelChats: () => {},
      timers: new FakeTimers(),
    });
    const heard: SchedulerProgress[] = [];
    const a = scheduler.acquire("a", signal());
    const b = scheduler.acquire("b", signal(), (p) => heard.push(p));
    await settle();
    // Both planned side by side; `a` was admitted and is starting while `b`'s plan is out.
    expect(fleet.log).toEqual(["a.start"]);
    firstPlan.resolve();
    await settle();
    // Its plan is thrown away: it waits for `a`'s start, then plans again.
    expect(fleet.log).toEqual(["a.start"]);
    expect(heard.at(-1)).toMatchObject({ phase: "waiting_for_memory", models: ["a"] });
    const gpu0 = () => scheduler?.snapshot().memory.find((m) => m.device === "gpu0")?.planned_bytes;
    expect(gpu0()).toBe(6 * GIB);
    fleet.last("a").open();
    const leaseA = await a;
    await settle();
    // Planned again beside `a`, which is in use: `b` waits for it, it does not load beside it.
    expect(fleet.last("b").plans).toBe(2);
    expect(fleet.log).toEqual(["a.start"]);
    expect(gpu0()).toBe(6 * GIB);
    // Once `a` is idle, `b` makes room by unloading it.
    leaseA.release();
    (await b).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start"]);
  });
});
