import { describe, expect, test } from "bun:test";
import type { HardwareSnapshot } from "../../src/plan/hardware.ts";
import { AHEAD_MS, ProbeAhead } from "../../src/plan/probe-ahead.ts";
import { cpuOnlyMachine } from "../fixtures/hardware.ts";

/** A probe that counts its calls and tells its snapshots apart by the call's number. */
function counting(fail = false) {
  const calls: (string | undefined)[] = [];
  const probe = async (binary?: string): Promise<HardwareSnapshot> => {
    calls.push(binary);
    if (fail && calls.length === 1) throw new Error("probe failed");
    return cpuOnlyMachine({ probes: [{ id: "n", status: "ok", message: String(calls.length), ms: 0 }] });
  };
  return { calls, probe };
}
const nth = (hw: HardwareSnapshot) => hw.probes[0]!.message;
/** A turn of the event loop: a probe that has answered is no longer running. */
const ended = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("ProbeAhead (docs/performance.md, A cold chat's way to the spawn)", () => {
  test("the first plan takes the probe started ahead; the next one probes afresh", async () => {
    let now = 0;
    const { calls, probe } = counting();
    const ahead = new ProbeAhead(probe, () => now);
    ahead.start("/bin/llama-server");
    now = AHEAD_MS - 1;
    expect(nth(await ahead.take("/bin/llama-server"))).toBe("1");
    expect(nth(await ahead.take("/bin/llama-server"))).toBe("2");
    expect(calls).toEqual(["/bin/llama-server", "/bin/llama-server"]);
  });

  test("too old, or for another binary: probed again", async () => {
    let now = 0;
    const { calls, probe } = counting();
    const ahead = new ProbeAhead(probe, () => now);
    ahead.start("/a");
    await ended();
    now = AHEAD_MS;
    expect(nth(await ahead.take("/a"))).toBe("2");
    now = 2 * AHEAD_MS;
    ahead.start("/a");
    await ended();
    expect(nth(await ahead.take("/b"))).toBe("4");
    expect(calls).toEqual(["/a", "/a", "/a", "/b"]);
  });

  test("a probe ahead that failed is made again, not handed on", async () => {
    const { calls, probe } = counting(true);
    const ahead = new ProbeAhead(probe, () => 0);
    ahead.start(undefined);
    expect(nth(await ahead.take(undefined))).toBe("2");
    expect(calls).toHaveLength(2);
  });

  test("a plan before the read-ahead: the read-ahead finds that probe under way and starts none", async () => {
    let now = 0;
    const { calls, probe } = counting();
    const ahead = new ProbeAhead(probe, () => now);
    const first = ahead.take("/bin/llama-server");
    now = 10;
    ahead.start("/bin/llama-server");
    expect(nth(await first)).toBe("1");
    expect(calls).toHaveLength(1);
    // Taken already: the next plan probes afresh, and so does a read-ahead once AHEAD_MS has passed.
    expect(nth(await ahead.take("/bin/llama-server"))).toBe("2");
    now = 10 + AHEAD_MS;
    ahead.start("/bin/llama-server");
    expect(calls).toHaveLength(3);
    await ended();
    ahead.start("/bin/other");
    expect(calls).toEqual(["/bin/llama-server", "/bin/llama-server", "/bin/llama-server", "/bin/other"]);
  });
});

/** A probe that answers only when told: `release(i)` ends the i-th call (from 0). */
function held() {
  const calls: (string | undefined)[] = [];
  const ends: ((fail: boolean) => void)[] = [];
  const probe = (binary?: string) =>
    new Promise<HardwareSnapshot>((resolve, reject) => {
      calls.push(binary);
      const n = String(calls.length);
      ends.push((fail) =>
        fail
          ? reject(new Error("probe failed"))
          : resolve(cpuOnlyMachine({ probes: [{ id: "n", status: "ok", message: n, ms: 0 }] })),
      );
    });
  return { calls, probe, release: (i: number, fail = false) => ends[i]!(fail) };
}

describe("one probe at a time (a CUDA probe's context holds VRAM the other would miss)", () => {
  test("a probe its plan gave up on (a cancelled pull's fit check) is joined by the next plan", async () => {
    let now = 0;
    const { calls, probe, release } = held();
    const ahead = new ProbeAhead(probe, () => now);
    ahead.start("/bin/llama-server");
    // The pull's verdict takes the read-ahead, then is cancelled: nothing waits for it any more.
    void ahead.take("/bin/llama-server");
    now = AHEAD_MS + 1;
    const next = ahead.take("/bin/llama-server");
    ahead.start("/bin/llama-server");
    expect(calls).toHaveLength(1);
    release(0);
    expect(nth(await next)).toBe("1");
    // Ended: the plan after probes afresh.
    await ended();
    const after = ahead.take("/bin/llama-server");
    expect(calls).toHaveLength(2);
    release(1);
    expect(nth(await after)).toBe("2");
  });

  test("plans at once (pinned models) share one probe; one for another binary waits for it", async () => {
    const { calls, probe, release } = held();
    const ahead = new ProbeAhead(probe, () => 0);
    const a = ahead.take("/a");
    const b = ahead.take("/a");
    const other = ahead.take("/b");
    ahead.start("/b");
    await ended();
    expect(calls).toEqual(["/a"]);
    release(0);
    expect([nth(await a), nth(await b)]).toEqual(["1", "1"]);
    await ended();
    expect(calls).toEqual(["/a", "/b"]);
    release(1);
    expect(nth(await other)).toBe("2");
  });

  test("started ahead while one for another binary runs: made after it, not dropped", async () => {
    // A test's earlier probe (for what PATH found) was running, and the binary named in a config
    // was never probed ahead (services.test.ts met it on CI).
    const { calls, probe, release } = held();
    const ahead = new ProbeAhead(probe, () => 0);
    ahead.start(undefined);
    ahead.start("/b");
    ahead.start("/b");
    await ended();
    expect(calls).toEqual([undefined]);
    release(0);
    await ended();
    expect(calls).toEqual([undefined, "/b"]);
    const b = ahead.take("/b");
    release(1);
    expect(nth(await b)).toBe("2");
    expect(calls).toHaveLength(2);
  });

  test("a shared probe that failed is made again once, for all who joined it", async () => {
    const { calls, probe, release } = held();
    const ahead = new ProbeAhead(probe, () => 0);
    ahead.start("/a");
    const a = ahead.take("/a");
    const b = ahead.take("/a");
    release(0, true);
    await ended();
    expect(calls).toEqual(["/a", "/a"]);
    release(1);
    expect([nth(await a), nth(await b)]).toEqual(["2", "2"]);
  });
});

describe("look: the machine for what loads nothing (models' fit verdicts)", () => {
  test("it joins or reads the probe made ahead and leaves it to the first plan", async () => {
    const { calls, probe, release } = held();
    const ahead = new ProbeAhead(probe, () => 0);
    ahead.start("/a");
    const listed = ahead.look("/a");
    release(0);
    expect(nth(await listed)).toBe("1");
    await ended();
    expect(nth(await ahead.look("/a"))).toBe("1");
    expect(nth(await ahead.take("/a"))).toBe("1");
    expect(calls).toEqual(["/a"]);
    // Taken: the next listing probes afresh, and leaves that probe to no plan.
    const again = ahead.look("/a");
    release(1);
    expect(nth(await again)).toBe("2");
    await ended();
    const plan = ahead.take("/a");
    release(2);
    expect(nth(await plan)).toBe("3");
  });
});

describe("changed: a llama-server of the core's stopped while a probe ran", () => {
  test("the next plan does not join the probe that read its memory as used; it probes after it", async () => {
    const { calls, probe, release } = held();
    const ahead = new ProbeAhead(probe, () => 0);
    // A listing's probe begins while a model is loaded; the model is unloaded meanwhile.
    const listed = ahead.look("/a");
    ahead.changed();
    const plan = ahead.take("/a");
    ahead.start("/a");
    await ended();
    expect(calls).toEqual(["/a"]);
    release(0);
    expect(nth(await listed)).toBe("1");
    await ended();
    expect(calls).toEqual(["/a", "/a"]);
    release(1);
    expect(nth(await plan)).toBe("2");
  });

  test("nor takes the probe made ahead before it", async () => {
    const { calls, probe } = counting();
    const ahead = new ProbeAhead(probe, () => 0);
    ahead.start("/a");
    await ended();
    ahead.changed();
    expect(nth(await ahead.take("/a"))).toBe("2");
    expect(calls).toEqual(["/a", "/a"]);
  });
});
