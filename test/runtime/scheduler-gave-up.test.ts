import { describe, expect, test } from "bun:test";
import { signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A load that gave up waiting (llama.load_wait_s) started nothing: the model shows what it was
// before, not `failed` (a crash or a failed start, docs/protocol.md "status"); the refusal says
// why the wait could not end (docs/supervisor.md "Scheduling several models").

describe("Scheduler: a load that gave up waiting for memory", () => {
  test("a model that waited for a busy holder is unloaded again, with no error, its runtime closed", async () => {
    const { fleet, timers, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, [], [], 2000);
    const chatOnA = await scheduler.acquire("a", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(2000);
    const err = await b;
    expect(err.code).toBe("model_plan_error");
    expect(err.data).toMatchObject({ holders: ["a"], pinned: [] });
    expect(err.message).toContain('"a" stayed in use');
    expect(err.message).toContain("waited 2 s");
    await settle();
    expect(row("b")).toMatchObject({ state: "unloaded", error: null });
    expect(fleet.last("b").stopped).toBe(true);
    chatOnA.release();
    (await scheduler.acquire("b", signal())).release();
    expect(row("b")?.state).toBe("loaded");
  });

  test("models.load that waited behind another model's load still starting is unloaded again", async () => {
    const { fleet, timers, scheduler, row } = schedulerOver(
      { a: { gib: 4, gated: true }, b: { gib: 4 } },
      [],
      [],
      1500,
    );
    const a = scheduler.acquire("a", signal());
    await settle();
    const b = rejection(scheduler.load("b"));
    await timers.advance(1500);
    const err = await b;
    expect(err.message).toContain("waited 1.5 s");
    expect(err.data?.holders).toEqual(["a"]);
    await settle();
    expect(row("b")).toMatchObject({ state: "unloaded", error: null, pinned: false });
    fleet.last("a").open();
    (await a).release();
  });

  test("a dead server's model that waited stays failed with its crash, its runtime kept for the restart", async () => {
    const { fleet, timers, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, [], [], 500);
    await scheduler.load("b");
    fleet.last("b").crash();
    const before = row("b");
    expect(before?.state).toBe("failed");
    const chatOnA = await scheduler.acquire("a", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(500);
    expect((await b).code).toBe("model_plan_error");
    await settle();
    expect(row("b")).toMatchObject({ state: "failed", error: before?.error });
    expect(fleet.last("b").stopped).toBe(false);
    chatOnA.release();
    (await scheduler.acquire("b", signal())).release();
    expect(fleet.made.get("b")?.length).toBe(1);
    expect(fleet.log.at(-1)).toBe("b.restart");
  });

  test("an idle pinned holder: the refusal says it is pinned and how to free it, not to wait", async () => {
    const { timers, scheduler } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, ["a"], [], 500);
    (await scheduler.acquire("a", signal())).release();
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(500);
    const err = await b;
    expect(err.code).toBe("model_plan_error");
    expect(err.data).toMatchObject({ model: "b", holders: ["a"], pinned: ["a"] });
    expect(err.message).toContain('"a" is pinned');
    expect(err.message).toContain("models.unload");
    expect(err.message).not.toContain("wait for its chats");
    expect(err.message).toContain("waited 0.5 s");
  });

  test("a busy holder and a pinned one: each named with its own way out", async () => {
    const { timers, scheduler } = schedulerOver(
      { a: { gib: 4 }, c: { gib: 4 }, b: { gib: 6 } },
      ["a"],
      [],
      1000,
    );
    (await scheduler.acquire("a", signal())).release();
    const chatOnC = await scheduler.acquire("c", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(1000);
    const err = await b;
    expect(err.data).toMatchObject({ holders: ["a", "c"], pinned: ["a"] });
    expect(err.message).toContain('"a" is pinned');
    expect(err.message).toContain('"c" stayed in use');
    expect(err.message).toContain("waited 1 s");
    chatOnC.release();
  });
});

describe("Scheduler: the way out a pinned holder's refusal names", () => {
  test("a holder models.load pinned (the config pins nothing): models.load with pin false frees it", async () => {
    const { timers, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, [], [], 500);
    await scheduler.load("a", { pin: true });
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(500);
    const err = await b;
    expect(err.data).toMatchObject({ holders: ["a"], pinned: ["a"] });
    // The config has no pin to take away (and is read once, at the core's start).
    expect(err.message).not.toContain("in the config");
    expect(err.message).toContain("models.load with pin: false");
    // The way it names works: unpinned, the idle holder makes room.
    await scheduler.load("a", { pin: false });
    (await scheduler.acquire("b", signal())).release();
    expect(row("a")?.state).toBe("unloaded");
    expect(row("b")?.state).toBe("loaded");
  });

  test("a holder the config pins: models.load with pin false frees it too, with no restart", async () => {
    const { timers, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, ["a"], [], 500);
    (await scheduler.acquire("a", signal())).release();
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(500);
    expect((await b).message).toContain("unpin it (models.load with pin: false)");
    await scheduler.load("a", { pin: false });
    (await scheduler.acquire("b", signal())).release();
    expect(row("a")?.state).toBe("unloaded");
    expect(row("b")?.state).toBe("loaded");
  });

  test("two holders in use: the message asks to unload one of them, not 'it'", async () => {
    const { timers, scheduler } = schedulerOver({ a: { gib: 4 }, c: { gib: 4 }, b: { gib: 6 } }, [], [], 500);
    const chatOnA = await scheduler.acquire("a", signal());
    const chatOnC = await scheduler.acquire("c", signal());
    const b = rejection(scheduler.acquire("b", signal()));
    await timers.advance(500);
    const err = await b;
    expect(err.message).toContain(
      '"a", "c" stayed in use: wait for their chats to end, or unload one of them',
    );
    chatOnA.release();
    chatOnC.release();
  });
});
