import { cpuNs } from "./cpu-time.ts";

export interface SettleOptions {
  /** How long every process must have been quiet; 0 does not wait. */
  quietMs: number;
  /** The most it waits, quiet or not. */
  maxMs: number;
  /** CPU (ns, all the processes together) a quiet window may still hold: timers, a poll. */
  slackNs: number;
  stepMs: number;
}

export interface SettleClock {
  cpu(pids: number[]): number;
  now(): number;
  sleep(ms: number): Promise<unknown>;
}

const system: SettleClock = {
  cpu: (pids) => pids.reduce((sum, pid) => sum + (cpuNs(pid) || 0), 0),
  now: () => performance.now(),
  sleep: (ms) => Bun.sleep(ms),
};

/**
 * Waits until the bench's processes have all been quiet for `quietMs` (or `maxMs` went by) and
 * says how long it waited. A llama-server keeps two threads busy for ~10 ms after the client
 * has read the end of its stream (docs/performance.md, "The side before"); on a 2-core machine a
 * side that starts then runs on what is left, so every side waits for the one before to be done.
 */
export async function settle(
  pids: number[],
  options: SettleOptions,
  clock: SettleClock = system,
): Promise<number> {
  const start = clock.now();
  if (options.quietMs <= 0) return 0;
  let windowStart = start;
  let windowCpu = clock.cpu(pids);
  for (;;) {
    const t = clock.now();
    if (t - windowStart >= options.quietMs || t - start >= options.maxMs) return t - start;
    await clock.sleep(options.stepMs);
    const cpu = clock.cpu(pids);
    // A thread or process that ended takes its CPU out of the sum: that is a change too, and the
    // window starts again from the lower sum, or the next work would hide under what left.
    if (cpu - windowCpu > options.slackNs || cpu < windowCpu) {
      windowStart = clock.now();
      windowCpu = cpu;
    }
  }
}
