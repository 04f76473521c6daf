import { describe, expect, test } from "bun:test";
import { signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A spare ask (recall's query vector, agent/turn/memory.ts: given up after 1.5 s) takes free room
// only (docs/models.md "Several models"): on a machine with room for one model, a chat's recall
// unloaded the chat's own model (claimed, not yet acquired) for the embedding model, then loaded it
// again after, on every turn.

describe("Scheduler: a spare ask", () => {
  test("unloads nothing to make room: it waits, and is dropped once its caller gives up", async () => {
    const { scheduler, row, fleet } = schedulerOver({ chat: { gib: 6 }, embed: { gib: 6 } });
    await scheduler.load("chat");
    const release = scheduler.claim("chat");
    const gaveUp = new AbortController();
    const query = rejection(scheduler.acquire("embed", gaveUp.signal, undefined, { spare: true }));
    await settle();
    expect(row("chat")?.state).toBe("loaded");
    expect(row("embed")?.state).toBe("loading");
    gaveUp.abort(new Error("recall gave up"));
    expect((await query).message).toBe("recall gave up");
    await settle();
    expect(row("embed")?.state).toBe("unloaded");
    // Its runtime, made for the plan, is closed; nothing was started or unloaded for it.
    expect(fleet.log).toEqual(["chat.start", "embed.stop"]);
    (await scheduler.acquire("chat", signal())).release();
    expect(fleet.log).toEqual(["chat.start", "embed.stop"]);
    release();
  });

  test("loads into free room as any ask does", async () => {
    const { scheduler, row } = schedulerOver({ chat: { gib: 4 }, embed: { gib: 4 } });
    await scheduler.load("chat");
    (await scheduler.acquire("embed", signal(), undefined, { spare: true })).release();
    expect(row("chat")?.state).toBe("loaded");
    expect(row("embed")?.state).toBe("loaded");
  });

  test("an ordinary ask joining its load makes room as before", async () => {
    const { scheduler, row, fleet } = schedulerOver({ chat: { gib: 6 }, embed: { gib: 6 } });
    await scheduler.load("chat");
    const query = scheduler.acquire("embed", signal(), undefined, { spare: true });
    await settle();
    expect(row("chat")?.state).toBe("loaded");
    const rows = await scheduler.acquire("embed", signal());
    (await query).release();
    rows.release();
    expect(row("chat")?.state).toBe("unloaded");
    expect(row("embed")?.state).toBe("loaded");
    expect(fleet.log).toEqual(["chat.start", "chat.save", "chat.stop", "embed.start"]);
  });
});
