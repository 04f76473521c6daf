import { describe, expect, test } from "bun:test";
import { signal } from "./helpers/fake-model-runtime.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// Which idle model makes room: the least recently used, and a `models.load` is a use (the host
// asked for the model: a picker's preload, docs/supervisor.md "Scheduling several models").

describe("Scheduler: least recently used, models.load counted", () => {
  test("a model models.load loaded just now is kept; the one chatted on before it makes room", async () => {
    const { fleet, timers, scheduler, row } = schedulerOver({ a: { gib: 4 }, b: { gib: 4 }, c: { gib: 4 } });
    (await scheduler.acquire("a", signal())).release();
    await timers.advance(60_000);
    await scheduler.load("b");
    expect(row("b")?.last_used_at).toBe(timers.now());
    await timers.advance(1_000);
    (await scheduler.acquire("c", signal())).release();
    expect(row("a")?.state).toBe("unloaded");
    expect(row("b")?.state).toBe("loaded");
    expect(fleet.log).toEqual(["a.start", "b.start", "a.save", "a.stop", "c.start"]);
  });

  test("models.load of a model already loaded makes it the most recently used", async () => {
    const { timers, scheduler, row } = schedulerOver({ a: { gib: 4 }, b: { gib: 4 }, c: { gib: 4 } });
    (await scheduler.acquire("b", signal())).release();
    await timers.advance(1_000);
    (await scheduler.acquire("a", signal())).release();
    await timers.advance(1_000);
    await scheduler.load("b");
    (await scheduler.acquire("c", signal())).release();
    expect(row("a")?.state).toBe("unloaded");
    expect(row("b")?.state).toBe("loaded");
  });
});
