import { describe, expect, test } from "bun:test";
import { refusedSpare } from "../../src/runtime/scheduler-errors.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A spare ask (recall's query vector, agent/turn/memory.ts: given up after 1.5 s) takes free room
// only (docs/supervisor.md "What is unloaded, when"): on a machine with room for one model, a
// chat's recall unloaded the chat's own model (claimed, not yet acquired) for the embedding model,
// then loaded it again after, on every turn.

describe("Scheduler: a spare ask", () => {
  test("unloads nothing to make room and waits for none: refused at once, the model as before", async () => {
    const { scheduler, row, fleet } = schedulerOver({ chat: { gib: 6 }, embed: { gib: 6 } });
    await scheduler.load("chat");
    const release = scheduler.claim("chat");
    const err = await rejection(scheduler.acquire("embed", signal(), undefined, { spare: true }));
    expect(refusedSpare(err)).toBe(true);
    expect(err.data).toMatchObject({ model: "embed", holders: ["chat"] });
    expect(row("chat")?.state).toBe("loaded");
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

  test("an ordinary ask joining its load before its admission makes room as before", async () => {
    const { scheduler, row, fleet } = schedulerOver({ chat: { gib: 6 }, embed: { gib: 6 } });
    await scheduler.load("chat");
    const query = scheduler.acquire("embed", signal(), undefined, { spare: true });
    const rows = scheduler.acquire("embed", signal());
    (await query).release();
    (await rows).release();
    expect(row("chat")?.state).toBe("unloaded");
    expect(row("embed")?.state).toBe("loaded");
    expect(fleet.log).toEqual(["chat.start", "chat.save", "chat.stop", "embed.start"]);
  });
});
