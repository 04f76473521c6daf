import { describe, expect, spyOn, test } from "bun:test";
import { existsSync, readFileSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type HeldLock, LockWatch, processAlive, tryLock } from "../../src/models/download-lock.ts";
import { processStartedAt, procIdentity, startedAtMs } from "../../src/runtime/proc-info.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const held = (r: ReturnType<typeof tryLock>): HeldLock => {
  if ("busy" in r) throw new Error(`busy: ${JSON.stringify(r.busy)}`);
  return r;
};

describe("one writer per blob", () => {
  test("the lock file names its owner; a second taker in this process finds it busy", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const lock = held(tryLock(path));
    expect(JSON.parse(readFileSync(path, "utf8"))).toMatchObject({ pid: process.pid });
    const second = tryLock(path);
    expect(second).toEqual({ busy: expect.objectContaining({ pid: process.pid }) });
    lock.release();
    expect(existsSync(path)).toBe(false);
    held(tryLock(path)).release();
  });

  test("a lock held by a live process elsewhere is busy; once that process is gone it is taken over", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const other = Bun.spawn(["sleep", "30"]);
    writeFileSync(path, JSON.stringify({ pid: other.pid, id: "theirs", started: Date.now() }));
    expect(tryLock(path)).toEqual({ busy: expect.objectContaining({ pid: other.pid, id: "theirs" }) });
    other.kill("SIGKILL");
    await other.exited;
    expect(processAlive(other.pid)).toBe(false);
    const lock = held(tryLock(path));
    expect(JSON.parse(readFileSync(path, "utf8")).pid).toBe(process.pid);
    lock.release();
  });

  test("a lock naming this pid but an id it does not hold was left by an earlier process (pid reuse)", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    writeFileSync(path, JSON.stringify({ pid: process.pid, id: "from-before", started: 0 }));
    held(tryLock(path)).release();
  });

  test("an empty lock is a writer that died creating it once it is old, and busy while it is new", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    writeFileSync(path, "");
    expect(tryLock(path)).toEqual({ busy: null });
    const old = new Date(Date.now() - 60_000);
    utimesSync(path, old, old);
    held(tryLock(path)).release();
  });

  test("releasing never removes a lock that someone else took meanwhile", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const lock = held(tryLock(path));
    writeFileSync(path, JSON.stringify({ pid: 1, id: "someone", started: 0 }));
    lock.release();
    expect(existsSync(path)).toBe(true);
  });
});

describe("a lock that is not a regular file (issue 19 item 4)", () => {
  test("a FIFO as the lock is read as an unreadable owner, never opened for a blocking read", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    expect(Bun.spawnSync(["mkfifo", path]).exitCode).toBe(0);
    // In a child with a deadline: a blocking read would hang it, not this test.
    const script = `
      const { tryLock } = await import(${JSON.stringify(join(import.meta.dir, "../../src/models/download-lock.ts"))});
      console.log(JSON.stringify(tryLock(${JSON.stringify(path)})));
    `;
    const child = Bun.spawn([process.execPath, "-e", script], { stdout: "pipe", timeout: 5000 });
    const out = await new Response(child.stdout).text();
    await child.exited;
    expect(child.signalCode).toBeNull();
    expect(JSON.parse(out)).toEqual({ busy: null });
  });
});

describe("a lock whose owner is not the process its pid names now (issue 19 item 6)", () => {
  const processStart = (pid: number) => procIdentity(pid)?.start_time ?? null;

  test("the lock records this process's start time, as runtime/proc-info reads it", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const lock = held(tryLock(path, { processStart }));
    expect(JSON.parse(readFileSync(path, "utf8"))).toMatchObject({
      pid: process.pid,
      proc_start: processStart(process.pid),
    });
    lock.release();
  });

  test("a pid now held by another process (after a reboot) is stale: its start time differs", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const other = Bun.spawn(["sleep", "30"]);
    try {
      const before = { pid: other.pid, id: "before-reboot", started: 0, proc_start: "1" };
      writeFileSync(path, JSON.stringify(before));
      const lock = held(tryLock(path, { processStart }));
      expect(JSON.parse(readFileSync(path, "utf8")).pid).toBe(process.pid);
      lock.release();
      // The same live process with its own start time recorded is a live owner: busy.
      const live = { ...before, id: "live", proc_start: processStart(other.pid) };
      writeFileSync(path, JSON.stringify(live));
      expect(tryLock(path, { processStart })).toEqual({ busy: expect.objectContaining({ id: "live" }) });
    } finally {
      other.kill("SIGKILL");
    }
  });

  test("a lock two days old, untouched since, naming a pid another process now has: stale at once", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const other = Bun.spawn(["sleep", "30"]);
    try {
      const twoDays = Date.now() - 2 * 86_400_000;
      writeFileSync(path, JSON.stringify({ pid: other.pid, id: "old", started: twoDays }));
      // Touched a moment ago (a beat): a live owner, busy, however old the lock.
      expect(tryLock(path)).toEqual({ busy: expect.objectContaining({ id: "old" }) });
      utimesSync(path, new Date(twoDays), new Date(twoDays));
      const lock = held(tryLock(path));
      expect(JSON.parse(readFileSync(path, "utf8")).pid).toBe(process.pid);
      lock.release();
    } finally {
      other.kill("SIGKILL");
    }
  });

  test("a lock written before its pid's process started, two beats missed: stale at once, without proc_start", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const other = Bun.spawn(["sleep", "30"]);
    try {
      const aMinuteAgo = Date.now() - 60_000;
      writeFileSync(path, JSON.stringify({ pid: other.pid, id: "before", started: aMinuteAgo }));
      const options = { processStartedAt };
      // Beating (touched just now): a live owner whatever its pid's start says.
      expect(tryLock(path, options)).toEqual({ busy: expect.objectContaining({ id: "before" }) });
      const quietSince = new Date(Date.now() - 30_000);
      utimesSync(path, quietSince, quietSince);
      // Without the start time, half a minute of silence is not yet enough (LockWatch's minute is).
      expect(tryLock(path)).toEqual({ busy: expect.objectContaining({ id: "before" }) });
      const lock = held(tryLock(path, options));
      expect(JSON.parse(readFileSync(path, "utf8")).pid).toBe(process.pid);
      lock.release();
      // The pid's process started before the lock was written: it may be the owner, busy.
      writeFileSync(path, JSON.stringify({ pid: other.pid, id: "after", started: Date.now() }));
      utimesSync(path, quietSince, quietSince);
      expect(tryLock(path, options)).toEqual({ busy: expect.objectContaining({ id: "after" }) });
    } finally {
      other.kill("SIGKILL");
    }
  });

  test("a process's wall-clock start: this one started before now and after the machine booted", () => {
    const started = processStartedAt(process.pid);
    if (process.platform !== "linux" && started === null) return;
    expect(started).not.toBeNull();
    expect(started!).toBeLessThanOrEqual(Date.now());
    expect(started!).toBeGreaterThan(Date.now() - 10 * 60_000 - performance.now());
    expect(startedAtMs("116444736000000000", "win32")).toBe(0);
    expect(startedAtMs("Thu Jan  1 00:00:01 1970 GMT", "darwin")).toBe(1000);
    expect(startedAtMs("garbage", "win32")).toBeNull();
  });

  test("a held lock's file is touched on a beat, so a waiter sees its owner alive", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const old = new Date(Date.now() - 60_000);
    const lock = held(tryLock(path, { heartbeatMs: 20 }));
    utimesSync(path, old, old);
    await Bun.sleep(120);
    expect(Date.now() - statSync(path).mtimeMs).toBeLessThan(5_000);
    lock.release();
  });

  // A waiter timed the lock's silence by the wall clock: stepped forward (NTP) or across a suspend
  // (its holder, on this machine, beat nothing meanwhile), it read an hour of silence at its next
  // poll and took a live holder's lock over. Its own monotonic clock counts neither.
  test("a waiter's silence is not the wall clock's step", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    writeFileSync(path, JSON.stringify({ pid: 1, id: "live", started: 0 }));
    const watch = new LockWatch(path, join(dir.path, "blob.incomplete"));
    expect(watch.quiet()).toBe(false);
    const wall = Date.now() + 3_600_000;
    const step = spyOn(Date, "now").mockImplementation(() => wall);
    try {
      expect(watch.quiet()).toBe(false);
    } finally {
      step.mockRestore();
    }
  });

  // Windows' monotonic clock (QueryPerformanceCounter) goes on through a suspend: a waiter whose
  // machine slept an hour, its holder (on this machine) asleep too and beating nothing, read that
  // hour as silence at its first poll on waking and took the live holder's lock over before its
  // overdue beat landed, two writers on one partial. A gap between two polls longer than the
  // bound is time the waiter did not see (a suspend, or the waiter itself not run): not counted.
  test("a gap between a waiter's polls longer than the bound is not silence it saw", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    writeFileSync(path, JSON.stringify({ pid: 1, id: "live", started: 0 }));
    const watch = new LockWatch(path, join(dir.path, "blob.incomplete"), 100);
    expect(watch.quiet(1_000)).toBe(false);
    expect(watch.quiet(1_000 + 3_600_000)).toBe(false);
    expect(watch.quiet(3_601_099)).toBe(false);
    expect(watch.quiet(3_601_100)).toBe(true);
  });

  // The same with a suspend a little under the bound (Windows, 58 s): the holder's last beat was
  // 4 s before it, so at the waiter's first poll on waking 62 s had gone by, read as silence, and
  // the lock was taken before the holder's overdue beat landed. A gap longer than a beat is
  // time the waiter did not see.
  test("a suspend a little under the bound is not silence the waiter saw", () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    writeFileSync(path, "{}");
    const watch = new LockWatch(path, join(dir.path, "blob.incomplete"));
    expect(watch.quiet(0)).toBe(false);
    for (let t = 500; t <= 4_000; t += 500) expect(watch.quiet(t)).toBe(false);
    expect(watch.quiet(62_000)).toBe(false);
    // A minute of silence it watched (4 s before the suspend, 56 s after) is still quiet.
    for (let t = 62_500; t < 118_000; t += 500) expect(watch.quiet(t)).toBe(false);
    expect(watch.quiet(118_000)).toBe(true);
  });

  test("a waiter gives up on a lock that shows no sign of life (no beat, no byte) for the bound", async () => {
    using dir = tmpdir();
    const path = join(dir.path, "blob.lock");
    const partial = join(dir.path, "blob.incomplete");
    writeFileSync(partial, "x");
    writeFileSync(path, JSON.stringify({ pid: 1, id: "silent", started: 0 }));
    const watch = new LockWatch(path, partial, 100);
    // Its clock handed in: real sleeps ran late on a loaded box, past the bound since the byte.
    expect(watch.quiet(1_000)).toBe(false);
    expect(watch.quiet(1_099)).toBe(false);
    expect(watch.quiet(1_100)).toBe(true);
    writeFileSync(partial, "xy"); // a byte landed: the owner is working
    expect(watch.quiet(1_160)).toBe(false);
    expect(watch.quiet(1_259)).toBe(false);
    expect(watch.quiet(1_260)).toBe(true);
  });
});
