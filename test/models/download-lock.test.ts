import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type HeldLock, processAlive, tryLock } from "../../src/models/download-lock.ts";
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
