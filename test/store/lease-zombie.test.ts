import { describe, expect, test } from "bun:test";
import { processAlive } from "../../src/store/session-lease.ts";
import { fakeProcs } from "../fixtures/zombie-probe.ts";

// A core that died holding a session's lease, and that its host has not collected yet (an app
// that never waits on the core it spawned), is a zombie: kill(pid, 0) still answers for it. Its
// lease was kept as a live holder's until it ran out, and a chat in another core waited for it.
describe("a session lease's holder", () => {
  test("a zombie is not alive: its lease is taken at once", () => {
    const pid = process.pid; // one that kill(0) answers for, whatever the probe
    expect(processAlive(pid, fakeProcs({ [pid]: { state: "Z" } }))).toBe(false);
  });

  test("a running one is alive", () => {
    const pid = process.pid;
    expect(processAlive(pid, fakeProcs({ [pid]: { state: "S" } }))).toBe(true);
  });
});
