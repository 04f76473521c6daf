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
    now = AHEAD_MS;
    expect(nth(await ahead.take("/a"))).toBe("2");
    now = 2 * AHEAD_MS;
    ahead.start("/a");
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
    ahead.start("/bin/other");
    expect(calls).toEqual(["/bin/llama-server", "/bin/llama-server", "/bin/llama-server", "/bin/other"]);
  });
});
