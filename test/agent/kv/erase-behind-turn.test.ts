import { afterEach, beforeEach, expect, spyOn, test } from "bun:test";
import { ERASE_RETRY, emptyBehind } from "../../../src/agent/kv/slot-clear.ts";
import { Launch } from "../../../src/runtime/launch.ts";

// The erase behind a save or restore that did not answer failed unanswered (a reset connection).
// A completion answered since was taken as proof that llama-server's queue had passed that save,
// and the retries stopped, the file's removal going on. It proves nothing: llama-server defers a
// slot action whose slot is still processing (`queue_tasks.defer` in SERVER_TASK_TYPE_SLOT_SAVE
// and _RESTORE, llama.cpp b10587), and a completion on another slot runs at once; one on the same
// slot is popped from the deferred queue first (`pop_deferred_task(id_slot)` matches `id_slot`,
// which a slot action leaves at -1). The deferred save then wrote the erased session's tokens to
// disk after the removal. Only the slot's own erase, deferred behind the save, answers after it.
// llama-server is an injected `fetch`; the clock stands still so any send counts as "after".

const pause = ERASE_RETRY.pauseMs;
let restore: (() => void)[] = [];
beforeEach(() => {
  ERASE_RETRY.pauseMs = 0;
  const clock = spyOn(performance, "now").mockReturnValue(1_000);
  restore.push(() => clock.mockRestore());
});
afterEach(() => {
  ERASE_RETRY.pauseMs = pause;
  for (const r of restore) r();
  restore = [];
});

/** Every slot action fails with no HTTP answer (a reset socket); the actions asked. */
function resetting(): string[] {
  const asked: string[] = [];
  const spy = spyOn(globalThis, "fetch").mockImplementation((async (url: string) => {
    asked.push(new URL(url).searchParams.get("action") ?? "");
    throw new TypeError("fetch failed");
  }) as unknown as typeof fetch);
  restore.push(() => spy.mockRestore());
  return asked;
}

/** A completion of this launch answered, sent now (by the still clock: after the failure). */
function completionAnswered(launch: Launch): void {
  (launch as { taskServed(sentAt?: number): void }).taskServed(performance.now());
}

test("another slot's completion answered does not end the erase's retries", async () => {
  const asked = resetting();
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 2 });
  const done = Promise.withResolvers<void>();
  emptyBehind(launch, 0, "a save", done.resolve);
  completionAnswered(launch);
  await done.promise;
  expect(asked).toEqual(["erase", "erase", "erase"]);
});

test("a turn that took the slot: its completion answered proves nothing either", async () => {
  const asked = resetting();
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1 });
  const done = Promise.withResolvers<void>();
  emptyBehind(launch, 0, "a restore", done.resolve);
  await launch.slots.workOn(0);
  launch.slots.take("u/t", 1);
  completionAnswered(launch);
  await done.promise;
  expect(asked).toEqual(["erase", "erase", "erase"]);
});
