import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// Failed models asked for by path are not kept for status, and an unload clears a failed model
// (scheduler.ts `forget`; docs/supervisor.md "Scheduling several models").

const missing = () => new CoreError("model_missing", "absent: no such file");
const names = (s: ReturnType<typeof schedulerOver>["scheduler"]) => s.snapshot().models.map((m) => m.name);

describe("Scheduler: failed models", () => {
  test("a path that fails to load, by a chat or by models.load, leaves no row", async () => {
    const { scheduler } = schedulerOver(
      { a: { gib: 2 }, "/m/x.gguf": { planFails: missing() } },
      [],
      ["/m/x.gguf"],
    );
    expect((await rejection(scheduler.acquire("/m/x.gguf", signal()))).code).toBe("model_missing");
    expect(names(scheduler)).toEqual(["a"]);
    expect((await rejection(scheduler.load("/m/x.gguf"))).code).toBe("model_missing");
    expect(names(scheduler)).toEqual(["a"]);
  });

  test("a path whose server died stays, failed, until unloaded: then it goes, its runtime closed", async () => {
    const { fleet, scheduler } = schedulerOver({ "/m/y.gguf": { gib: 2 } }, [], ["/m/y.gguf"]);
    await scheduler.load("/m/y.gguf");
    fleet.last("/m/y.gguf").crash();
    scheduler.snapshot();
    expect(names(scheduler)).toEqual(["/m/y.gguf"]);
    await scheduler.unload("/m/y.gguf");
    expect(names(scheduler)).toEqual([]);
    expect(fleet.last("/m/y.gguf").stopped).toBe(true);
  });

  test("unload of a failed configured model clears it to unloaded", async () => {
    const { scheduler, row } = schedulerOver({
      bad: { gib: 2, fail: new CoreError("internal_error", "no") },
    });
    await rejection(scheduler.acquire("bad", signal()));
    expect(row("bad")?.state).toBe("failed");
    await scheduler.unload("bad");
    expect(row("bad")?.state).toBe("unloaded");
  });

  test("a failed model with a chat on it: its unload is refused model_busy; forced, the chat is cancelled", async () => {
    // The chat, preparing its turn, would load the model again after a forced unload answered.
    const { fleet, scheduler, row, cancelled } = schedulerOver({ a: { gib: 2 } });
    await scheduler.load("a");
    fleet.last("a").crash();
    expect(row("a")?.state).toBe("failed");
    const release = scheduler.claim("a");
    const err = await rejection(scheduler.unload("a"));
    expect(err.data).toMatchObject({ reason: "model_busy", model: "a", chats: 1 });
    expect(row("a")?.state).toBe("failed");
    await scheduler.unload("a", { force: true });
    expect(cancelled).toEqual(["a"]);
    expect(row("a")?.state).toBe("unloaded");
    release();
  });
});
