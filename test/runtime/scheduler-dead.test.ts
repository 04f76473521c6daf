import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A loaded model whose llama-server died behind the core's back (a SIGKILL) with no lease out
// (model-state.ts `failed` with its runtime kept; docs/supervisor.md "Scheduling several models").

describe("Scheduler: a model whose server died", () => {
  test("holds no memory: another model loads beside the dead pinned one at once", async () => {
    const { fleet, scheduler, row, planned } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, ["a"]);
    await scheduler.load("a");
    fleet.last("a").crash();
    expect(row("a")?.state).toBe("failed");
    expect(row("a")?.memory_bytes).toBeNull();
    expect(planned()).toBe(0);
    const b = await scheduler.acquire("b", signal());
    expect(row("b")?.state).toBe("loaded");
    b.release();
  });

  test("a load waiting for room goes ahead when the holder's server dies", async () => {
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, ["a"]);
    await scheduler.load("a");
    const b = scheduler.acquire("b", signal());
    await settle();
    expect(row("b")?.state).toBe("loading");
    fleet.last("a").crash();
    (await b).release();
    expect(row("b")?.state).toBe("loaded");
  });

  test("a load waiting for room decides again once a pinned holder failed by a wedge has stopped, not only at load_wait_s", async () => {
    const { fleet, timers, scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } }, ["a"]);
    const chat = await scheduler.acquire("a", signal());
    const b = scheduler.acquire("b", signal());
    await settle();
    expect(row("b")?.state).toBe("loading");
    // The chat's wedge is reported: the server is stopped (its grace, then a kill), the chat ends.
    fleet.last("a").failReported();
    chat.release();
    await settle();
    expect(row("a")?.state).toBe("loaded");
    // Its stop ends: nothing is released nor aborted then, yet its memory is free.
    fleet.last("a").halted();
    await timers.advance(1_000);
    expect(row("b")?.state).toBe("loaded");
    (await b).release();
  });

  test("models.load starts it again, the same runtime (its restart budget), and answers once it is up", async () => {
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 6 } }, ["a"]);
    await scheduler.load("a");
    fleet.last("a").crash();
    const r = await scheduler.load("a");
    expect(r.state).toBe("loaded");
    expect(fleet.last("a").up).toBe(true);
    expect(fleet.made.get("a")?.length).toBe(1);
    expect(fleet.log).toEqual(["a.start", "a.restart"]);
    expect(row("a")?.state).toBe("loaded");
  });

  test("a chat restarts it; a failed restart keeps the runtime for the next try", async () => {
    const spent = new CoreError("internal_error", "not restarting it");
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 6, restartFails: spent } });
    (await scheduler.acquire("a", signal())).release();
    fleet.last("a").crash();
    expect(await rejection(scheduler.acquire("a", signal()))).toBe(spent);
    expect(row("a")?.state).toBe("failed");
    expect(fleet.last("a").stopped).toBe(false);
    delete fleet.spec("a").restartFails;
    (await scheduler.acquire("a", signal())).release();
    expect(row("a")?.state).toBe("loaded");
    expect(fleet.made.get("a")?.length).toBe(1);
  });

  test("under a lease it stays loaded (the lease's reconnect restarts it); released, it is failed", async () => {
    const { fleet, scheduler, row } = schedulerOver({ a: { gib: 6 } });
    const lease = await scheduler.acquire("a", signal());
    fleet.last("a").crash();
    expect(row("a")?.state).toBe("loaded");
    lease.release();
    expect(row("a")?.state).toBe("failed");
  });

  test("shutdown closes a dead server's kept runtime", async () => {
    const { fleet, scheduler } = schedulerOver({ a: { gib: 6 } });
    await scheduler.load("a");
    fleet.last("a").crash();
    scheduler.snapshot();
    await scheduler.stop();
    expect(fleet.last("a").stopped).toBe(true);
  });

  test("a path model's dead server keeps its row and runtime (its restart budget) through status, until unloaded", async () => {
    const { fleet, scheduler, row } = schedulerOver({ "/m/x.gguf": { gib: 2 } }, [], ["/m/x.gguf"]);
    (await scheduler.acquire("/m/x.gguf", signal())).release();
    fleet.last("/m/x.gguf").crash();
    expect(row("/m/x.gguf")?.state).toBe("failed");
    expect(row("/m/x.gguf")?.state).toBe("failed");
    (await scheduler.acquire("/m/x.gguf", signal())).release();
    expect(fleet.made.get("/m/x.gguf")?.length).toBe(1);
    fleet.last("/m/x.gguf").crash();
    await scheduler.unload("/m/x.gguf");
    expect(row("/m/x.gguf")).toBeUndefined();
  });
});
