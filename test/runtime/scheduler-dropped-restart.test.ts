import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { signal } from "./helpers/fake-model-runtime.ts";
import { settle } from "./helpers/fake-timers.ts";
import { rejection } from "./helpers/harness.ts";
import { schedulerOver } from "./helpers/scheduler-setup.ts";

// A dead server's restart that nobody waits for any more before it was let in (its chat
// cancelled, its claim released) started nothing: the model keeps its crash and its runtime,
// and so its restart budget, as one that gave up waiting does (docs/supervisor.md "Scheduling
// several models"); `unloaded` would hide why it died and reset the budget with a fresh runtime.

const spent = new CoreError("internal_error", "restart budget spent");

/** b loaded then crashed (its restart budget spent), a in use by a chat so b's restart waits for room. */
async function crashedBehindBusy() {
  const s = schedulerOver({ a: { gib: 6 }, b: { gib: 6, restartFails: spent } });
  await s.scheduler.load("b");
  s.fleet.last("b").crash();
  const before = s.row("b");
  expect(before?.state).toBe("failed");
  const chatOnA = await s.scheduler.acquire("a", signal());
  return { ...s, before, chatOnA };
}

describe("Scheduler: a dead server's restart dropped while it waits for room", () => {
  test("its chat cancelled: still failed with its crash, its runtime and restart budget kept", async () => {
    const { fleet, scheduler, row, before, chatOnA } = await crashedBehindBusy();
    const chat = new AbortController();
    const b = rejection(scheduler.acquire("b", chat.signal));
    await settle();
    expect(row("b")?.state).toBe("loading");
    chat.abort(new CoreError("cancelled", "chat cancelled"));
    expect((await b).code).toBe("cancelled");
    await settle();
    expect(row("b")).toMatchObject({ state: "failed", error: before?.error });
    expect(fleet.last("b").stopped).toBe(false);
    // The next chat's restart is the same runtime's, its budget still spent: refused, not a fresh start.
    chatOnA.release();
    expect((await rejection(scheduler.acquire("b", signal()))).message).toBe(spent.message);
    expect(fleet.made.get("b")?.length).toBe(1);
    expect(fleet.log.at(-1)).toBe("b.restart");
  });
});
