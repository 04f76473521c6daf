import { describe, expect, test } from "bun:test";
import type { SchedulerProgress } from "../../src/runtime/model-runtime.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
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
    expect(heard[0]).toMatchObject({ phase: "waiting_for_memory", holders: ["a"] });
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
});
