import { describe, expect, test } from "bun:test";
import { pidAlive } from "../../src/platform/pid-alive.ts";
import { fakeProcs } from "../fixtures/zombie-probe.ts";

describe("pidAlive", () => {
  const probe = fakeProcs({
    10: { state: "S" },
    11: { state: "Z" },
    12: { state: "Z", tasks: [12, 13] },
    14: { state: "X" },
  });

  test("a running process is alive; no process is not", () => {
    expect(pidAlive(10, probe)).toBe(true);
    expect(pidAlive(99, probe)).toBe(false);
  });

  test("a zombie (dead, not yet collected by its parent) is not alive, though kill(0) answers", () => {
    expect(pidAlive(11, probe)).toBe(false);
    expect(pidAlive(14, probe)).toBe(false);
  });

  test("a leader that exited while its threads run is alive", () => {
    expect(pidAlive(12, probe)).toBe(true);
  });

  test("another user's process (EPERM) is alive; without /proc, kill's answer stands", () => {
    const eperm = () => {
      throw Object.assign(new Error("not permitted"), { code: "EPERM" });
    };
    expect(pidAlive(20, { kill: eperm })).toBe(true);
    expect(pidAlive(11, { kill: probe.kill })).toBe(true);
  });

  test("Windows' answer, where it gives one, is taken over kill's", () => {
    expect(pidAlive(10, { ...probe, windows: () => false })).toBe(false);
    expect(pidAlive(10, { ...probe, windows: () => null })).toBe(true);
  });
});

describe("pidAlive of what names no one process", () => {
  // kill(0, 0) asks this process's own group and kill(-1, 0) every process it may signal: both
  // answer, so a lock or lease row naming pid 0 or -1 (a corrupt or hand-written file) was judged
  // held by a live process, a pull waiting its whole quiet bound for nobody.
  test("pid 0, a negative pid or a non-integer is not alive", () => {
    const answers = { kill: () => {} };
    for (const pid of [0, -1, -4242, 1.5, Number.NaN]) expect(pidAlive(pid, answers)).toBe(false);
  });
});

describe("pidAlive where /proc is another pid namespace's", () => {
  // A core in a container whose /proc was left the host's (or another container's): kill(pid, 0)
  // asks this namespace, /proc/<pid>/stat names another process there. A zombie there made a live
  // core here dead, and its session lease or download lock was taken at once, two cores writing one
  // turn or one model file (docs/supervisor.md "Orphans"; group-live.ts reads /proc likewise only
  // when /proc/self is this process). kill's answer stands.
  const probe = fakeProcs({ 11: { state: "Z" } });

  test("a zombie in a /proc that is not this namespace's does not make a live pid dead", () => {
    expect(pidAlive(11, { ...probe, procIsOurs: () => false })).toBe(true);
    expect(pidAlive(11, { ...probe, procIsOurs: () => true })).toBe(false);
  });
});
