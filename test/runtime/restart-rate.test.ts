import { describe, expect, test } from "bun:test";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import type { Supervisor } from "../../src/runtime/supervisor.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, rejection, waitFor } from "./helpers/harness.ts";

// Issue 10 item 19: the restart budget is a rate (llama.max_restarts within
// llama.restart_window_s), an explicit warmup tries at once, and the refusal says when the
// next automatic try will be.

const never = () => new AbortController().signal;

/** Starts (or restarts) the server, kills it outright, waits until the supervisor noticed. */
async function crashOnce(supervisor: Supervisor): Promise<void> {
  const lease = await supervisor.acquire(never());
  process.kill(supervisor.pid() as number, "SIGKILL");
  expect(await waitFor(() => lease.died.aborted)).toBe(true);
  lease.release();
}

describe.skipIf(process.platform === "win32")("restart budget as a rate", () => {
  const WINDOW_MS = 60_000;

  function spentBudget(dir: string) {
    const clock = { now: 1_700_000_000_000 };
    const h = makeSupervisor(dir, {
      settings: { maxRestarts: 1, restartBackoffMs: 10, restartWindowMs: WINDOW_MS },
      options: { now: () => clock.now },
    });
    return { ...h, clock };
  }

  test("once the window has passed, the next acquire starts llama-server again", async () => {
    await using dir = tmpdir();
    const { supervisor, clock } = spentBudget(dir.path);
    await crashOnce(supervisor); // first start, crash
    clock.now += 1000;
    await crashOnce(supervisor); // restart 1 of 1, crash
    clock.now += 1000;
    expect((await rejection(supervisor.acquire(never()))).message).toContain("not restarting");
    clock.now += WINDOW_MS;
    const lease = await supervisor.acquire(never());
    expect(supervisor.pid()).toBeGreaterThan(0);
    lease.release();
    await supervisor.stop();
  });

  test("the refusal says when the next automatic try will be", async () => {
    await using dir = tmpdir();
    const { supervisor, clock } = spentBudget(dir.path);
    await crashOnce(supervisor);
    clock.now += 1000;
    const restartedAt = clock.now;
    await crashOnce(supervisor);
    clock.now += 5000;
    const err = await rejection(supervisor.acquire(never()));
    expect(err.code).toBe("internal_error");
    const nextTry = new Date(restartedAt + WINDOW_MS).toISOString();
    expect(err.data?.next_try_at).toBe(nextTry);
    expect(err.message).toContain(nextTry);
    expect(err.message).toContain(`in ${(WINDOW_MS - 5000) / 1000} s`);
    expect(err.message).toContain("warmup");
    await supervisor.stop();
  });

  test("an explicit try (warmup) starts at once even with the budget spent", async () => {
    await using dir = tmpdir();
    const { supervisor, clock } = spentBudget(dir.path);
    await crashOnce(supervisor);
    clock.now += 1000;
    await crashOnce(supervisor);
    expect((await rejection(supervisor.acquire(never()))).message).toContain("not restarting");
    const lease = await supervisor.acquire(never(), undefined, { explicit: true });
    expect(supervisor.pid()).toBeGreaterThan(0);
    lease.release();
    // A chat after it is served by the running server; the budget is still spent for the
    // next crash.
    const chat = await supervisor.acquire(never());
    chat.release();
    await supervisor.stop();
  });

  test("a warmup that joins a chat's restart in its back-off restarts at once, as it would alone", async () => {
    await using dir = tmpdir();
    // A back-off (capped at 30 s) longer than this test's time: only the host's ask ends it.
    const { supervisor } = makeSupervisor(dir.path, {
      slots: 2,
      settings: { maxRestarts: 3, restartBackoffMs: 60_000 },
    });
    try {
      await crashOnce(supervisor);
      // The chat's acquire begins the restart, which waits out its back-off; the warmup joins it.
      const chat = supervisor.acquire(never());
      const heard: StartProgress[] = [];
      const warm = await supervisor.acquire(never(), (p) => heard.push(p), { explicit: true });
      warm.release();
      (await chat).release();
      // Its back-off ended as the warmup joined: the warmup never hears one (protocol.md).
      expect(heard.length).toBeGreaterThan(0);
      expect(heard.filter((p) => "backoff_ms" in p)).toEqual([]);
    } finally {
      await supervisor.stop();
    }
  }, 10_000);
});
