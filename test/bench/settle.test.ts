import { describe, expect, test } from "bun:test";
import { type SettleClock, settle } from "../../bench/overhead/settle.ts";

/** A fake clock whose processes use `busyNs(t)` of CPU per ms at time t. */
function fakeClock(busyNsPerMs: (t: number) => number): SettleClock & { slept: number } {
  let t = 0;
  let cpu = 0;
  const clock = {
    slept: 0,
    cpu: () => cpu,
    now: () => t,
    sleep: async (ms: number) => {
      for (let i = 0; i < ms; i++) cpu += busyNsPerMs(t + i);
      t += ms;
      clock.slept += ms;
    },
  };
  return clock;
}

const options = { quietMs: 10, maxMs: 250, slackNs: 200_000, stepMs: 2 };

describe("settle (bench/overhead/settle.ts)", () => {
  test("waits out a process that is still busy, then a quiet window", async () => {
    // One core's worth of CPU for the first 12 ms, as a llama-server after its stream ends.
    const clock = fakeClock((t) => (t < 12 ? 1_000_000 : 0));
    const waited = await settle([1], options, clock);
    expect(waited).toBeGreaterThanOrEqual(12 + 10);
    expect(waited).toBeLessThan(12 + 10 + 2 * options.stepMs);
  });

  test("already quiet: one window", async () => {
    const clock = fakeClock(() => 0);
    expect(await settle([1], options, clock)).toBe(10);
  });

  test("a little CPU (timers, a poll) still counts as quiet", async () => {
    const clock = fakeClock(() => 10_000);
    expect(await settle([1], options, clock)).toBe(10);
  });

  test("never quiet: gives up at maxMs", async () => {
    const clock = fakeClock(() => 500_000);
    const waited = await settle([1], options, clock);
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(250 + options.stepMs + 1);
  });

  test("a thread that ended (the sum drops) starts the window again from the lower sum", async () => {
    // 50 ms of CPU leaves the sum at 4 ms (a thread ended); then one core's worth until 16 ms,
    // less than what left, which must not hide under it.
    let t = 0;
    const clock: SettleClock = {
      cpu: () => (t < 4 ? 50_000_000 : (Math.min(t, 16) - 4) * 1_000_000),
      now: () => t,
      sleep: async (ms) => {
        t += ms;
      },
    };
    expect(await settle([1], options, clock)).toBeGreaterThanOrEqual(16 + 10);
  });

  test("quietMs 0 does not wait", async () => {
    const clock = fakeClock(() => 1_000_000);
    expect(await settle([1], { ...options, quietMs: 0 }, clock)).toBe(0);
    expect(clock.slept).toBe(0);
  });
});
