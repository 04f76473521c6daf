import { describe, expect, test } from "bun:test";
import { etaSeconds, ProgressReporter, RateMeter } from "../../src/models/progress.ts";
import type { DownloadProgress } from "../../src/protocol/pull.ts";

describe("download progress", () => {
  test("the rate is taken over a sliding window, so a stall shows at once", () => {
    const m = new RateMeter(3000);
    for (let t = 0; t <= 10_000; t += 500) m.sample(t, t * 1000); // 1 MB/s for 10 s
    expect(m.rate(10_000)).toBeCloseTo(1_000_000, -3);
    // Nothing arrives for 2 s: the window still holds the last second of transfer.
    m.sample(12_000, 10_000_000);
    expect(m.rate(12_000)).toBeLessThan(600_000);
    m.sample(14_000, 10_000_000);
    expect(m.rate(14_000)).toBe(0);
    // A restart from zero forgets the history instead of reporting a negative rate.
    m.sample(14_500, 0);
    expect(m.rate(14_500)).toBe(0);
  });

  test("the ETA follows the rate, none while it is zero", () => {
    expect(etaSeconds(500, 1500, 100)).toBe(10);
    expect(etaSeconds(500, 1500, 0)).toBeNull();
    expect(etaSeconds(1500, 1500, 0)).toBe(0);
  });

  test("events come on a beat: at least every 500 ms, never more than ~10 a second", async () => {
    const events: (DownloadProgress & { t: number })[] = [];
    const r = new ProgressReporter({
      file: "m.gguf",
      part: 1,
      parts: 1,
      total: 1000,
      emit: (p) => events.push({ ...p, t: performance.now() }),
    });
    let done = 0;
    r.start("download", 0, () => done);
    const feeder = setInterval(() => {
      done = Math.min(1000, done + 7); // bytes arrive far more often than events go out
    }, 2);
    await Bun.sleep(1300);
    clearInterval(feeder);
    r.finish();
    const gaps = events.slice(1).map((e, i) => e.t - events[i]!.t);
    expect(events.length).toBeGreaterThanOrEqual(5);
    expect(events.length).toBeLessThanOrEqual(1300 / 100 + 2);
    // The beat is 250 ms: half the 500 ms promised, so a timer running late on a busy machine
    // still keeps it; the median shows the beat itself.
    expect(gaps.toSorted((a, b) => a - b)[Math.floor(gaps.length / 2)]!).toBeLessThan(320);
    expect(Math.max(...gaps)).toBeLessThan(750);
    // The forced last event may follow a beat closely; the beat itself keeps 100 ms apart.
    expect(Math.min(...gaps.slice(0, -1))).toBeGreaterThanOrEqual(95);
    expect(events.at(-1)).toMatchObject({ file: "m.gguf", phase: "download", total: 1000 });
    expect(events.some((e) => e.bytes_per_s > 0 && e.eta_s !== null)).toBe(true);
  });

  test("the check phase reports no rate and no ETA", () => {
    const events: DownloadProgress[] = [];
    const r = new ProgressReporter({ file: "f", part: 2, parts: 3, total: 10, emit: (p) => events.push(p) });
    r.start("check", 4);
    r.finish();
    expect(events[0]).toEqual({
      file: "f",
      part: 2,
      parts: 3,
      phase: "check",
      bytes_done: 4,
      total: 10,
      bytes_per_s: 0,
      eta_s: null,
    });
  });
});

describe("the last event", () => {
  test("is not sent again when an event with the same count went out just now", () => {
    // A pull again (the blob in place) holds the beat before the snapshot's link, which sends
    // an event, and finishes at once: two identical events back to back, against the 100 ms
    // the beat keeps between events (docs/models.md "Progress").
    let t = 1000;
    const events: DownloadProgress[] = [];
    const reporter = () =>
      new ProgressReporter({
        file: "m.gguf",
        part: 1,
        parts: 1,
        total: 10,
        emit: (p) => events.push(p),
        now: () => t,
      });
    const r = reporter();
    r.hold(10);
    r.finish();
    expect(events).toHaveLength(1);
    // A later finish, or one with a new count, still sends the last state.
    const later = reporter();
    later.hold(5);
    later.update(10);
    later.finish();
    expect(events.slice(1).map((e) => e.bytes_done)).toEqual([5, 10]);
    t += 150;
    later.finish();
    expect(events).toHaveLength(4);
  });
});
