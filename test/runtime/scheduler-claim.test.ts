import { describe, expect, test } from "bun:test";
import { cancelledError } from "../../src/protocol/errors.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A chat counts as its model's user from its request (scheduler.ts `claim`), before its turn's
// preparation reaches the acquire (docs/protocol.md#modelsunload).

describe("Scheduler: a chat's claim", () => {
  test("an unload without force is refused model_busy while a chat is claimed; after its end it goes", async () => {
    const { scheduler, row } = schedulerOver({ a: { gib: 2 } });
    await scheduler.load("a");
    const release = scheduler.claim("a");
    const err = await rejection(scheduler.unload("a"));
    expect(err.code).toBe("invalid_request");
    expect(err.data).toMatchObject({ reason: "model_busy", model: "a", chats: 1 });
    expect(row("a")?.chats).toBe(1);
    // Its acquire within the claim is the same chat, counted once.
    const lease = await scheduler.acquire("a", signal());
    expect(row("a")?.chats).toBe(1);
    lease.release();
    release();
    release();
    expect(row("a")?.chats).toBe(0);
    await scheduler.unload("a");
    expect(row("a")?.state).toBe("unloaded");
  });

  test("force cancels the claimed chats and unloads", async () => {
    const { scheduler, row, cancelled } = schedulerOver({ a: { gib: 2 } });
    await scheduler.load("a");
    const release = scheduler.claim("a");
    await scheduler.unload("a", { force: true });
    expect(cancelled).toEqual(["a"]);
    expect(row("a")?.state).toBe("unloaded");
    release();
  });

  test("an unload under way does not hide a chat waiting to load the model again: refused, or forced, cancelled", async () => {
    // The chat waits for the unload, then would load the model again: a forced unload answered
    // while the model came back up for a chat it never cancelled.
    const { scheduler, row, cancelled, fleet } = schedulerOver({ a: { gib: 2 } });
    await scheduler.load("a");
    const first = scheduler.unload("a");
    const chat = new AbortController();
    const waiting = rejection(scheduler.acquire("a", chat.signal));
    const plain = await rejection(scheduler.unload("a"));
    expect(plain.data).toMatchObject({ reason: "model_busy", model: "a", chats: 1 });
    const forced = scheduler.unload("a", { force: true });
    expect(cancelled).toEqual(["a"]);
    chat.abort(cancelledError('model "a" was unloaded')); // what cancelChats does to its chats
    await Promise.all([first, forced]);
    expect((await waiting).code).toBe("cancelled");
    expect(row("a")?.state).toBe("unloaded");
    expect(fleet.log).toEqual(["a.start", "a.save", "a.stop"]);
  });

  test("a claim alone does not keep a model from being unloaded to make room; a chat in its acquire does", async () => {
    // The claimed chat may be waiting for its session, which the chat needing the room holds.
    const { scheduler, row } = schedulerOver({ a: { gib: 6 }, b: { gib: 6 } });
    await scheduler.load("a");
    const release = scheduler.claim("a");
    const b = await scheduler.acquire("b", signal());
    expect(row("a")?.state).toBe("unloaded");
    expect(row("b")?.state).toBe("loaded");
    b.release();
    release();
    const held = await scheduler.acquire("a", signal());
    const b2 = scheduler.acquire("b", signal());
    await Bun.sleep(0);
    expect(row("a")?.state).toBe("loaded");
    expect(row("b")?.state).toBe("loading");
    held.release();
    (await b2).release();
    expect(row("a")?.state).toBe("unloaded");
  });

  test("a claim on a path never loaded leaves no row once released", () => {
    const { scheduler } = schedulerOver({ a: { gib: 2 } });
    const release = scheduler.claim("/m/x.gguf");
    release();
    expect(scheduler.snapshot().models.map((m) => m.name)).toEqual(["a"]);
  });
});
