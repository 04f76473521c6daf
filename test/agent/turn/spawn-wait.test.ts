import { afterEach, describe, expect, jest, test } from "bun:test";
import { SPAWN_WAIT_MS, spawnedWithin } from "../../../src/agent/turn/spawn-wait.ts";
import type { StartTicket } from "../../../src/runtime/endpoint.ts";

// A plain chat waits for its start's spawn before it loads the turn (methods/chat.ts), and the
// turn waits for the same start again (run-turn.ts `begunStart`): the bound is the start's, not
// each wait's (docs/performance.md, "A cold chat's way to the spawn").

afterEach(() => jest.useRealTimers());

async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => {
    done = true;
  });
  for (let i = 0; i < 10; i++) await Promise.resolve();
  return done;
}

describe("the wait for a start's spawn", () => {
  test("a second wait for a start not spawned ends with the first's bound, not another", async () => {
    jest.useFakeTimers();
    const ticket: StartTicket = { spawned: new Promise<void>(() => {}) };
    const first = spawnedWithin(ticket);
    jest.advanceTimersByTime(SPAWN_WAIT_MS);
    expect(await settled(first)).toBe(true);
    // The turn's own wait, once the chat's has run out: a slow probe or a wait for memory held
    // the turn's run_start twice as long.
    const second = spawnedWithin(ticket);
    expect(await settled(second)).toBe(true);
  });

  test("a wait is still bounded, and cut by its own signal", async () => {
    jest.useFakeTimers();
    const ticket: StartTicket = { spawned: new Promise<void>(() => {}) };
    const wait = spawnedWithin(ticket);
    jest.advanceTimersByTime(SPAWN_WAIT_MS - 1);
    expect(await settled(wait)).toBe(false);
    const abort = new AbortController();
    const cut = spawnedWithin(ticket, abort.signal);
    abort.abort(new Error("cancelled"));
    expect(await settled(cut)).toBe(true);
    jest.advanceTimersByTime(1);
    expect(await settled(wait)).toBe(true);
  });
});
