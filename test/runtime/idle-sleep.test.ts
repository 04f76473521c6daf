import { describe, expect, jest, spyOn, test } from "bun:test";
import {
  canChangePhase,
  type SleepPhase,
  SleepWatch,
  type SleepWatchOptions,
} from "../../src/runtime/idle-sleep.ts";
import {
  ggufMappedBytes,
  intakeFraction,
  modelIntake,
  residentBytes,
} from "../../src/runtime/proc-memory.ts";
import { ProgressBeat } from "../../src/runtime/progress-beat.ts";
import { SlotUse } from "../../src/runtime/slot-use.ts";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import { MAX_TIMER_MS } from "../../src/util/timer-limit.ts";
import { waitFor } from "../fixtures/wait.ts";

const never = () => new AbortController().signal;

/** A watch whose leases are counted in a slot table first, as its Launch counts them (launch.ts). */
function counted(options: Omit<SleepWatchOptions, "inUse">): SleepWatch {
  const use = new SlotUse(16);
  const w = new SleepWatch({ ...options, inUse: () => use.leases });
  const lease = w.lease.bind(w);
  const release = w.release.bind(w);
  w.lease = (signal, onProgress) => {
    return use.enter(never()).then(() => {
      w.arrived();
      return lease(signal, onProgress);
    });
  };
  w.release = () => {
    if (use.leave()) release();
  };
  return w;
}

describe("SleepWatch: idle sleep as the supervisor follows it", () => {
  test("its phase changes only as the table says: a wake starts asleep, and ends awake or asleep", () => {
    const phases: SleepPhase[] = ["awake", "asleep", "waking"];
    const valid = new Set(["awake→asleep", "asleep→waking", "asleep→awake", "waking→awake", "waking→asleep"]);
    for (const from of phases)
      for (const to of phases)
        expect({ pair: `${from}→${to}`, ok: canChangePhase(from, to) }).toEqual({
          pair: `${from}→${to}`,
          ok: valid.has(`${from}→${to}`),
        });
  });

  function watch(idleMs: number, asleep: () => boolean | null, rouseMs = 100) {
    const calls = { looks: 0, rouses: 0 };
    const w = counted({
      idleMs,
      isAsleep: async () => {
        calls.looks++;
        return asleep();
      },
      rouse: async () => {
        calls.rouses++;
        await Bun.sleep(rouseMs);
      },
    });
    return { w, calls };
  }

  test("0 disables it: no look, no wake, ever", async () => {
    const { w, calls } = watch(0, () => true);
    await w.lease(never());
    w.release();
    await Bun.sleep(50);
    expect(calls).toEqual({ looks: 0, rouses: 0 });
    expect(w.state).toBe("awake");
    w.dispose();
  });

  test("the longest idle_sleep_s a config takes: its first look waits, never fires at once (a timer past 2^31-1 ms does)", () => {
    const delays: number[] = [];
    const spy = spyOn(globalThis, "setTimeout").mockImplementation(((_fn: () => void, ms?: number) => {
      delays.push(ms ?? 0);
      return { unref() {} } as unknown as ReturnType<typeof setTimeout>;
    }) as unknown as typeof setTimeout);
    try {
      const w = new SleepWatch({
        // The config's bound (schema.ts): whole seconds a timer can wait, 2147483 s.
        idleMs: Math.floor(MAX_TIMER_MS / 1000) * 1000,
        inUse: () => 0,
        isAsleep: async () => false,
        rouse: async () => {},
      });
      w.dispose();
    } finally {
      spy.mockRestore();
    }
    expect(delays).toEqual([MAX_TIMER_MS]);
  });

  test("a lease inside the idle time costs nothing: no look", async () => {
    const { w, calls } = watch(60_000, () => true);
    await w.lease(never());
    w.release();
    await w.lease(never());
    expect(calls.looks).toBe(0);
    w.dispose();
  });

  test("idle long enough: the timer looks (off the hot path) and learns it sleeps; concurrent leases share one wake", async () => {
    let asleep = false;
    const { w, calls } = watch(100, () => asleep, 200);
    asleep = true;
    expect(await waitFor(() => w.state === "asleep", { timeoutMs: 3000 })).toBe(true);
    expect(calls.looks).toBe(1);
    const heard: StartProgress[][] = [[], [], []];
    await Promise.all(heard.map((h) => w.lease(never(), (p) => h.push(p))));
    expect(calls.rouses).toBe(1);
    expect(w.state).toBe("awake");
    for (const h of heard) {
      expect(h[0]?.phase).toBe("waking");
      expect(h.at(-1)?.phase).toBe("ready");
    }
    for (const _ of heard) w.release();
    w.dispose();
  });

  test("each sleep is counted, however it was learned: the slots' KV cache went with it (docs/agent.md#prompt-reuse)", async () => {
    let asleep = false;
    const { w } = watch(100, () => asleep, 10);
    expect(w.sleeps).toBe(0);
    asleep = true;
    expect(await waitFor(() => w.state === "asleep", { timeoutMs: 3000 })).toBe(true);
    expect(w.sleeps).toBe(1);
    await w.lease(never());
    asleep = false;
    w.release();
    expect(w.sleeps).toBe(1);
    // A child says so itself (child mode); its `ready` after its own wake is no new sleep.
    w.heard("sleeping");
    expect(w.sleeps).toBe(2);
    w.heard("ready");
    w.heard("sleeping");
    expect(w.sleeps).toBe(3);
    w.dispose();
  });

  test("still awake when it looks: it looks again later, backing off", async () => {
    const { w, calls } = watch(50, () => false);
    expect(await waitFor(() => calls.looks >= 2, { timeoutMs: 4000 })).toBe(true);
    expect(w.state).toBe("awake");
    w.dispose();
  });

  test("a wake that fails rejects the leases that waited; the next lease tries again", async () => {
    let fail = true;
    const w = counted({
      idleMs: 10,
      isAsleep: async () => true,
      rouse: async () => {
        if (fail) throw new Error("no answer");
      },
    });
    await Bun.sleep(20);
    await expect(w.lease(never())).rejects.toThrow("no answer");
    w.release();
    expect(w.state).toBe("asleep");
    fail = false;
    await Bun.sleep(20);
    await w.lease(never());
    expect(w.state).toBe("awake");
    w.dispose();
  });

  test("a cancelled lease stops waiting, the wake goes on for the others", async () => {
    const { w } = watch(10, () => true, 300);
    await Bun.sleep(20);
    const cancel = new AbortController();
    const mine = w.lease(cancel.signal);
    const other = w.lease(never());
    cancel.abort(new Error("cancelled"));
    await expect(mine).rejects.toThrow("cancelled");
    await other;
    expect(w.state).toBe("awake");
    w.dispose();
  });
});

describe("ProgressBeat", () => {
  test("repeats the current phase with a fresh elapsed time at least every 500 ms, stops at ready", () => {
    // Timers and clock moved by the test: a loaded machine's late timer cannot read as a gap.
    const t0 = 1_000_000;
    let clock = t0;
    const pass = (ms: number) => {
      for (let i = 0; i < ms / 10; i++) {
        clock += 10;
        jest.advanceTimersByTime(10);
      }
    };
    const heard: { p: StartProgress; at: number }[] = [];
    jest.useFakeTimers();
    try {
      const beat = new ProgressBeat(
        t0,
        () => 0.25,
        () => clock,
      );
      beat.add((p) => heard.push({ p, at: clock }));
      beat.report({ phase: "loading" });
      pass(1100);
      beat.report({ phase: "ready" });
      beat.stop();
      pass(300);
    } finally {
      jest.useRealTimers();
    }
    expect(heard.length).toBeGreaterThanOrEqual(4);
    for (let i = 1; i < heard.length; i++)
      expect((heard[i] as { at: number }).at - (heard[i - 1] as { at: number }).at).toBeLessThanOrEqual(500);
    expect(heard[0]?.p).toMatchObject({ phase: "loading", fraction: 0.25 });
    expect(heard.at(-1)?.p.phase).toBe("ready");
    expect(heard.at(-1)?.p.elapsed_ms).toBeGreaterThanOrEqual(1000);
    expect("fraction" in (heard.at(-1)?.p ?? {})).toBe(false);
  });

  test("the same phase reported again is not sent twice in a row; a new attempt is", () => {
    const beat = new ProgressBeat(Date.now());
    const heard: string[] = [];
    beat.add((p) => heard.push(p.phase === "starting" ? `starting ${p.attempt}` : p.phase));
    beat.report({ phase: "loading" });
    beat.report({ phase: "loading" });
    beat.report({ phase: "starting", attempt: 2 });
    beat.report({ phase: "ready" });
    beat.stop();
    expect(heard).toEqual(["loading", "starting 2", "ready"]);
  });

  test("a listener that throws does not stop the others", () => {
    const beat = new ProgressBeat(Date.now());
    const heard: string[] = [];
    beat.add(() => {
      throw new Error("host bug");
    });
    beat.add((p) => heard.push(p.phase));
    beat.report({ phase: "starting", attempt: 1 });
    beat.stop();
    expect(heard).toEqual(["starting"]);
  });
});

describe("reading a loading llama-server from /proc", () => {
  test("the resident bytes of .gguf mappings, from smaps text", () => {
    const smaps = [
      "7f0000000000-7f0000100000 r--s 00000000 fd:01 123 /models/tiny.gguf",
      "Size:               1024 kB",
      "Rss:                 512 kB",
      "7f0000100000-7f0000200000 r-xp 00000000 fd:01 456 /usr/lib/libllama.so",
      "Rss:                 900 kB",
      "7f0000200000-7f0000300000 r--s 00000000 fd:01 124 /models/split-00002-of-00002.GGUF",
      "Rss:                  64 kB",
      "7f0000300000-7f0000400000 rw-p 00000000 00:00 0 ",
      "Rss:                 100 kB",
    ].join("\n");
    expect(ggufMappedBytes(smaps)).toBe((512 + 64) * 1024);
  });

  test("the fraction: the larger of mapped and read, since the baseline, capped at 1; unknown without a size", () => {
    expect(intakeFraction({ mappedBytes: 50, readBytes: 10 }, 100)).toBe(0.5);
    expect(intakeFraction({ mappedBytes: 0, readBytes: 1010 }, 100, 1000)).toBe(0.1);
    expect(intakeFraction({ mappedBytes: 500, readBytes: 0 }, 100)).toBe(1);
    expect(intakeFraction({ mappedBytes: 5, readBytes: 0 }, undefined)).toBeUndefined();
    expect(intakeFraction(null, 100)).toBeUndefined();
  });

  test.skipIf(process.platform !== "linux")(
    "this process: its resident memory and read counters are readable",
    () => {
      expect(residentBytes(process.pid)).toBeGreaterThan(1024 * 1024);
      expect(modelIntake(process.pid)).toMatchObject({ mappedBytes: 0 });
      expect(residentBytes(2 ** 22 + 12345)).toBeNull();
    },
  );
});
