import { expect, test } from "bun:test";
import { utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LOCK_ABANDONED_MS, tryLock } from "../../src/models/download-lock.ts";
import { spaceOf } from "../../src/platform/pid-space.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Two containers (or two machines) pulling into one models folder: the lock's holder is a core of
// another pid space, its pid naming no process here, or this very core's pid (each container's
// core is often pid 1) with an id this process does not hold. The lock was taken at once, two
// writers on one partial. A holder of another pid space is judged by its beat alone, on this
// core's clock: a waiter's LockWatch gives up once the lock's file and partial stood still.

/** A pid no process has here (above Linux's pid_max). */
const NO_SUCH_PID = 4_194_304 + 7;

function lockOf(path: string, owner: object, untouchedMs = 0): void {
  writeFileSync(path, JSON.stringify({ id: "theirs", started: Date.now() - untouchedMs, ...owner }));
  const at = new Date(Date.now() - untouchedMs);
  utimesSync(path, at, at);
}

test("a fresh lock of another pid space is busy, its pid gone here or this core's own", () => {
  using dir = tmpdir();
  const path = join(dir.path, "blob.lock");
  for (const pid of [NO_SUCH_PID, process.pid]) {
    lockOf(path, { pid, space: "there" });
    expect(tryLock(path, { space: "here" })).toEqual({ busy: expect.objectContaining({ id: "theirs" }) });
  }
});

// Its file's time is set by its holder's beat on its own clock (futimes): a holder whose clock
// is behind ours by more than LOCK_ABANDONED_MS beats a file that reads here as untouched that
// long, and its live lock was taken at once, two writers on one partial. Only the waiter's
// LockWatch, which times the beat's changes on this core's clock, gives up on it.
test("a lock of another pid space is not taken for its file's age by our clock", () => {
  using dir = tmpdir();
  const path = join(dir.path, "blob.lock");
  lockOf(path, { pid: NO_SUCH_PID, space: "there" }, LOCK_ABANDONED_MS + 60_000);
  expect(tryLock(path, { space: "here" })).toEqual({ busy: expect.objectContaining({ id: "theirs" }) });
});

test("a lock of this pid space, or of an earlier version, whose pid is gone is taken at once", () => {
  using dir = tmpdir();
  const path = join(dir.path, "blob.lock");
  for (const owner of [{ pid: NO_SUCH_PID, space: "here" }, { pid: NO_SUCH_PID }]) {
    lockOf(path, owner);
    const lock = tryLock(path, { space: "here" });
    expect("busy" in lock).toBe(false);
    if (!("busy" in lock)) lock.release();
  }
});

// A crash or power cut mid-pull, then a reboot: the lock names this host's previous boot, read as
// another pid space, and the next pull of that model waited a minute of its silence first. A
// previous boot's holder is gone, whatever its pid names now (here: this very core's).
test("a lock of this host's previous boot is taken at once; another machine's is not", () => {
  using dir = tmpdir();
  const path = join(dir.path, "blob.lock");
  const ns = "pid:[4026531836]";
  const here = spaceOf("box", "boot-2", ns);
  // Last beat before this boot began (the test machine's): 1970.
  lockOf(path, { pid: process.pid, space: spaceOf("box", "boot-1", ns) }, Date.now() - 1000);
  const lock = tryLock(path, { space: here });
  expect("busy" in lock).toBe(false);
  if (!("busy" in lock)) lock.release();
  lockOf(path, { pid: NO_SUCH_PID, space: spaceOf("other", "boot-1", ns) });
  expect(tryLock(path, { space: here })).toEqual({ busy: expect.objectContaining({ id: "theirs" }) });
});

// Two machines of one host name ("ubuntu", "raspberrypi") on one network folder read each other
// as a previous boot: a live holder's lock, beaten 5 s ago, was taken at once, two writers on one
// partial. A previous boot's lock was last touched before this boot began; one touched since is
// another machine's, waited out as another space's.
test("a lock of this host's name and another boot touched since this boot began is busy", () => {
  using dir = tmpdir();
  const path = join(dir.path, "blob.lock");
  const ns = "pid:[4026531836]";
  lockOf(path, { pid: NO_SUCH_PID, space: spaceOf("box", "boot-1", ns) }, 5_000);
  expect(tryLock(path, { space: spaceOf("box", "boot-2", ns) })).toEqual({
    busy: expect.objectContaining({ id: "theirs" }),
  });
});
