import { describe, expect, test } from "bun:test";
import type { SchedulerProgress } from "../../src/runtime/model-runtime.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A load waiting for the room of a busy model is not starved by chats that keep arriving for that
// model (docs/supervisor.md "What waits"): later requests for it queue behind the waiting load.

describe("Scheduler: a wait for room is fair", () => {
  test("a steady stream of chats on the loaded model no longer starves the waiting load", async () => {
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } });
    const first = await scheduler.acquire("a", signal());
    const b = scheduler.acquire("b", signal());
    await settle();
    expect(row("b")?.state).toBe("loading"); // waiting for a's room
    // A second chat on a arrives after b began to wait: it queues behind b, it does not take a.
    const heard: SchedulerProgress[] = [];
    let secondHas = false;
    const second = scheduler
      .acquire("a", signal(), (p) => heard.push(p))
      .then((l) => {
        secondHas = true;
        return l;
      });
    await settle();
    expect(secondHas).toBe(false);
    expect(heard[0]).toMatchObject({ phase: "waiting_for_memory", models: ["b"] });
    first.release();
    const onB = await b; // a's last chat ended: b made its room
    expect(row("a")?.state).toBe("loading"); // the queued chat loads it again, waiting for b's room
    expect(secondHas).toBe(false);
    onB.release();
    (await second).release();
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop", "b.start", "b.save", "b.stop", "a.start"]);
  });

  test("a queued chat is not held once the waiting load gives up (load_wait_s)", async () => {
    const { timers, scheduler } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, [], [], 2000);
    const first = await scheduler.acquire("a", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await settle();
    const second = scheduler.acquire("a", signal());
    await timers.advance(2000);
    expect((await b).code).toBe("model_plan_error");
    (await second).release();
    first.release();
  });

  test("a cancel ends a queued chat's wait at once", async () => {
    const { scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } });
    const first = await scheduler.acquire("a", signal());
    const b = scheduler.acquire("b", signal());
    await settle();
    const ctl = new AbortController();
    const second = rejection(scheduler.acquire("a", ctl.signal));
    await settle();
    ctl.abort(new Error("the chat was cancelled"));
    expect((await second).message).toBe("the chat was cancelled");
    first.release();
    (await b).release();
    expect(row("b")?.state).toBe("loaded");
  });

  test("shutdown ends a queued chat's wait: refused, not left waiting", async () => {
    const { scheduler } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } });
    const first = await scheduler.acquire("a", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await settle();
    const second = rejection(scheduler.acquire("a", signal()));
    await settle();
    const stopped = scheduler.stop();
    first.release();
    await stopped;
    expect((await second).code).toBe("cancelled");
    expect((await b).code).toBe("cancelled");
  });

  test("a model pinned: nothing queues behind a load its pin keeps waiting", async () => {
    const { scheduler } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, ["a"], [], 2000);
    const first = await scheduler.acquire("a", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await settle();
    (await scheduler.acquire("a", signal())).release(); // not held: waiting would free nothing
    first.release();
    void b;
    await scheduler.stop();
  });
});
