import { expect, test } from "bun:test";
import { processAlive } from "../../src/models/download-lock.ts";
import { fakeProcs } from "../fixtures/zombie-probe.ts";

// A core killed mid-pull, and that its host has not collected yet (an app that never waits on the
// core it spawned), is a zombie: kill(pid, 0) still answers for it. Its download lock was judged
// a live owner's, and the next pull of that model waited for it (the lock's beat stopped, a full
// LOCK_QUIET_MS) before taking it over. This process's pid: one kill(0) answers for.
const pid = process.pid;

test.each([
  ["a zombie: its lock is stale at once", { state: "Z" }, false],
  ["a running owner", { state: "R" }, true],
  ["a leader that exited while its threads run", { state: "Z", tasks: [pid, pid + 1] }, true],
])("a download lock's owner, %s", (_, entry, alive) => {
  expect(processAlive(pid, fakeProcs({ [pid]: entry }))).toBe(alive);
});
