import { describe, expect, test } from "bun:test";
import { cpuSpent, type ThreadTimes, threadTimes } from "../../bench/overhead/cpu-time.ts";

const times = (rows: [string, string, number][]): ThreadTimes =>
  new Map(rows.map(([tid, name, ns]) => [tid, { name, ns }]));

// bench/chat-overhead.ts read a core's CPU over a reply as the sum over its live threads after
// less the sum before: a thread that ended meanwhile (a JIT worker, a pool thread let go) took its
// whole earlier time off, and a reply's CPU per token read -16.6 µs in a run.
describe("the CPU a process spent between two snapshots", () => {
  test("an ended thread's earlier time is not taken off; a new thread counts whole", () => {
    const before = times([
      ["1", "local-ai", 5_000_000],
      ["2", "JITWorker", 40_000_000],
    ]);
    const after = times([
      ["1", "local-ai", 7_000_000],
      ["3", "HTTP Client", 1_000_000],
    ]);
    const spent = cpuSpent(before, after);
    expect(spent.total).toBe(3_000_000);
    expect(spent.byName.get("local-ai")).toBe(2_000_000);
    expect(spent.byName.get("HTTP Client")).toBe(1_000_000);
    expect(spent.byName.has("JITWorker")).toBe(false);
  });

  test("threads of one name add up, and a tid reused by a younger thread never counts below zero", () => {
    const before = times([
      ["1", "HeapHelper", 100],
      ["2", "HeapHelper", 900],
    ]);
    const after = times([
      ["1", "HeapHelper", 400],
      ["2", "HeapHelper", 50],
    ]);
    expect(cpuSpent(before, after).byName.get("HeapHelper")).toBe(300);
  });

  test("this process's own threads read from /proc on Linux", () => {
    const own = threadTimes(process.pid);
    if (process.platform !== "linux") return expect(own.size).toBe(0);
    expect(own.size).toBeGreaterThan(0);
    expect([...own.values()].every((t) => Number.isFinite(t.ns) && t.ns >= 0)).toBe(true);
  });
});
