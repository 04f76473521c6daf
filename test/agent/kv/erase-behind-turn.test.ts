import { afterEach, beforeEach, expect, spyOn, test } from "bun:test";
import { ERASE_RETRY, emptyBehind } from "../../../src/agent/kv/slot-clear.ts";
import { Launch } from "../../../src/runtime/launch.ts";

// The erase behind a save or restore that did not answer failed unanswered (a reset connection):
// it was asked again, twice, even once a new turn had taken the slot, which waits for the first
// erase only. The retry emptied the cache that turn had just filled (an extra prefill, and a save
// of the slot after would write a near-empty state over the session's good file). A task sent
// after the failure and answered proves llama-server's queue passed the old one (tasks in order,
// 93b): the removal goes on then, with no erase more. llama-server is an injected `fetch`.

const pause = ERASE_RETRY.pauseMs;
let restore: (() => void) | undefined;
beforeEach(() => {
  ERASE_RETRY.pauseMs = 60_000; // ended by the proof, never waited out here
});
afterEach(() => {
  ERASE_RETRY.pauseMs = pause;
  restore?.();
  restore = undefined;
});

/** Every slot action fails with no HTTP answer (a reset socket); the actions asked. */
function resetting(): string[] {
  const asked: string[] = [];
  const spy = spyOn(globalThis, "fetch").mockImplementation((async (url: string) => {
    asked.push(new URL(url).searchParams.get("action") ?? "");
    throw new TypeError("fetch failed");
  }) as unknown as typeof fetch);
  restore = () => spy.mockRestore();
  return asked;
}

/** A bound only on when a regression shows: a retry would be asked within these turns. */
async function turns(): Promise<void> {
  for (let t = 0; t < 50; t++) await new Promise((r) => setImmediate(r));
}

test("a turn taking the slot after the first erase failed is not emptied by a retry", async () => {
  const asked = resetting();
  ERASE_RETRY.pauseMs = 0;
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 1 });
  let settled = false;
  emptyBehind(launch, 0, "a save", () => {
    settled = true;
  });
  await launch.slots.workOn(0);
  // The next turn takes the slot once the first erase is over, and sends its request.
  launch.slots.take("u/t", 1);
  const sentAt = performance.now();
  await turns();
  expect({ asked, settled }).toEqual({ asked: ["erase"], settled: false });
  launch.taskServed(sentAt); // its completion answered: the queue passed the save
  await turns();
  expect({ asked, settled }).toEqual({ asked: ["erase"], settled: true });
});

test("a task sent after the failure and answered ends the retries: the removal goes on", async () => {
  const asked = resetting();
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 2 });
  const done = Promise.withResolvers<void>();
  emptyBehind(launch, 0, "a restore", done.resolve);
  await launch.slots.workOn(0);
  await turns();
  launch.taskServed(performance.now()); // another slot's completion, sent after it
  await done.promise;
  expect(asked).toEqual(["erase"]);
});

test("a task sent before the failure proves nothing", async () => {
  const asked = resetting();
  ERASE_RETRY.pauseMs = 0;
  const launch = new Launch({ baseUrl: "http://127.0.0.1:9", apiKey: "k", slots: 2 });
  const before = performance.now();
  const done = Promise.withResolvers<void>();
  emptyBehind(launch, 0, "a save", done.resolve);
  launch.taskServed(before);
  await done.promise;
  expect(asked).toEqual(["erase", "erase", "erase"]);
});
