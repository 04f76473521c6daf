import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { spaceOf } from "../../src/platform/pid-space.ts";
import { type PidRecord, pidFilePath, reapLeftover, runDir } from "../../src/runtime/pid-file.ts";
import { untouchedLong } from "../../src/runtime/pid-record-read.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Two containers (or machines) sharing a data folder: a record another container's core wrote
// names its pids, which name nothing here (or another process). Its owner looked dead to this
// core and its record went: once that core died, its llama-server was never reaped, holding its
// memory. A record of another pid space (platform/pid-space.ts) is left alone.

function record(space?: string, ownerPid = 4241): PidRecord {
  return {
    kind: "llama-server",
    pid: 4242,
    start_time: "100",
    cmdline: "llama-server",
    owner: { pid: ownerPid, start_time: "99", ...(space ? { space } : {}) },
    written_at: new Date(0).toISOString(),
  };
}

async function reap(
  r: PidRecord,
  here = "here",
  alive = false,
  writtenMs?: number,
): Promise<{ actions: string[]; kept: boolean }> {
  using dir = tmpdir();
  mkdirSync(runDir(dir.path), { recursive: true, mode: 0o700 });
  const file = pidFilePath(dir.path, r.owner.pid);
  writeFileSync(file, JSON.stringify(r), { mode: 0o600 });
  if (writtenMs !== undefined) utimesSync(file, writtenMs / 1000, writtenMs / 1000);
  const outcomes = await reapLeftover(dir.path, {
    configured: { "llama-server": ["llama-server"] },
    alive: () => alive,
    identity: () => null,
    kill: () => {
      throw new Error("never signalled");
    },
    space: here,
  });
  return { actions: outcomes.map((o) => o.action), kept: existsSync(file) };
}

test("a record of another pid space is left, its pids not judged here", async () => {
  expect(await reap(record("there"))).toEqual({ actions: ["other_space"], kept: true });
});

test("a record of this pid space, or an earlier version's, whose processes are gone goes", async () => {
  for (const r of [record("here"), record()])
    expect(await reap(r)).toEqual({ actions: ["gone"], kept: false });
});

// A crash or power cut, then a reboot: the records the previous core left name this host's
// previous boot, read as another pid space, and were kept for good, piling up under run/. A
// previous boot's processes are all gone: its records go, its pids (another process's now, here
// all alive) never signalled. Another machine's are still left.
test("a record of this host's previous boot goes, its pids never signalled", async () => {
  const ns = "pid:[4026531836]";
  const here = spaceOf("box", "boot-2", ns);
  expect(await reap(record(spaceOf("box", "boot-1", ns)), here, true)).toEqual({
    actions: ["gone"],
    kept: false,
  });
  expect(await reap(record(spaceOf("other", "boot-1", ns)), here, true)).toEqual({
    actions: ["other_space"],
    kept: true,
  });
  // Another machine of this host's name, its record written since this boot began: read as a
  // previous boot by its name alone, its record went, its llama-server never reaped on its crash.
  const live = { ...record(spaceOf("box", "boot-1", ns)), written_at: new Date().toISOString() };
  expect(await reap(live, here, true)).toEqual({ actions: ["other_space"], kept: true });
});

// A core in a container is often pid 1 (docs/agent.md, "Two cores on one data folder"): its
// record, owner pid 1, was read as malformed ("unreadable") and removed by every other
// container's core, and by its own second start, its llama-server then unreaped once it died.
// An owner's pid is only looked at, never signalled: 1 is a core's as any other.
test("a record whose owner is pid 1 (a container's core) is read, another space's left", async () => {
  expect(await reap(record("there", 1))).toEqual({ actions: ["other_space"], kept: true });
});

// A core whose space was read in part (a passing EMFILE on /proc/sys/kernel/random/boot_id, so its
// boot's part is the hash of nothing: platform/pid-space.ts `cachedSpace`) and that died during
// llama-server's load left a record its own successors (this host, this boot, this pid namespace)
// judged another space's and kept for good: that llama-server was never reaped, holding its RAM
// and GPU. Such a record is acted on only once its process is shown to be the very llama-server
// (its start time and program); never judged gone by a pid that names nothing here.
describe("a record whose space was read in part", () => {
  const ns = "pid:[4026531836]";
  const here = spaceOf("box", "boot-1", ns);
  const partial = (space: string): PidRecord => ({ ...record(space), written_at: new Date().toISOString() });

  async function reapPartial(r: PidRecord, startTime = "100", ours = here) {
    using dir = tmpdir();
    mkdirSync(runDir(dir.path), { recursive: true, mode: 0o700 });
    const file = pidFilePath(dir.path, r.owner.pid);
    writeFileSync(file, JSON.stringify(r), { mode: 0o600 });
    const signals: string[] = [];
    let running = true;
    const outcomes = await reapLeftover(dir.path, {
      configured: { "llama-server": ["llama-server"] },
      alive: (pid) => pid === 4242 && running,
      identity: (pid) =>
        pid === 4242 && running
          ? { start_time: startTime, cmdline: "/opt/llama/llama-server -m m.gguf" }
          : null,
      kill: (pid, signal) => {
        signals.push(`${pid} ${signal}`);
        running = false;
      },
      graceMs: 0,
      killWaitMs: 0,
      groupOf: () => null,
      groupProc: null,
      driveAnswers: async () => true,
      space: ours,
    });
    return { actions: outcomes.map((o): string => o.action), kept: existsSync(file), signals };
  }

  test("its llama-server, shown to be the very one, is stopped", async () => {
    expect(await reapPartial(partial(spaceOf("box", "", ns)))).toEqual({
      actions: ["stopped"],
      kept: false,
      signals: ["4242 SIGTERM"],
    });
    expect((await reapPartial(partial(spaceOf("box", "boot-1", "")))).actions).toEqual(["stopped"]);
  });

  // The reaping core's own read in part at its start (the same passing EMFILE): its dead
  // predecessor's whole record read as another space's, that llama-server left until a later start.
  test("read in part by the reaping core, a whole record's shown llama-server is stopped", async () => {
    const ours = spaceOf("box", "", ns);
    expect((await reapPartial(partial(here), "100", ours)).actions).toEqual(["stopped"]);
    expect((await reapPartial(partial(here), "7", ours)).actions).toEqual(["other_space"]);
  });

  test("a pid reused, or another part unlike ours, is left and never signalled", async () => {
    const left = { actions: ["other_space"], kept: true, signals: [] as string[] };
    expect(await reapPartial(partial(spaceOf("box", "", ns)), "7")).toEqual(left);
    expect(await reapPartial(partial(spaceOf("box", "", "pid:[4026532001]")))).toEqual(left);
    expect(await reapPartial(partial(spaceOf("other", "", ns)))).toEqual(left);
    expect(await reapPartial(partial(spaceOf("box", "boot-2", ns)))).toEqual(left);
  });
});

// A container or machine that never comes back left its records under run/ for good, each one
// logged at every start. Another space's record untouched (its file's time: written at its
// server's start and once ready) for 30 days goes, logged once; nothing is signalled, its pid
// never judged here. One of a day's age, or whose time is ahead of ours, stays.
test("another space's record untouched for 30 days goes, nothing signalled", async () => {
  const day = 86_400_000;
  expect(await reap(record("there"), "here", true, Date.now() - 31 * day)).toEqual({
    actions: ["expired"],
    kept: false,
  });
  for (const at of [Date.now() - day, Date.now() + 40 * day])
    expect(await reap(record("there"), "here", true, at)).toEqual({ actions: ["other_space"], kept: true });
});

// A record whose file time is over a day ahead of ours (this host's clock stepped back, a share's
// clock ahead) never came within 30 days of now: kept for good, logged at every start. Its time
// is set to now when first seen so, and it expires 30 days on, nothing signalled.
test("another space's record whose time is far ahead expires 30 days after first seen", async () => {
  const day = 86_400_000;
  using dir = tmpdir();
  mkdirSync(runDir(dir.path), { recursive: true, mode: 0o700 });
  const file = pidFilePath(dir.path, 4241);
  writeFileSync(file, JSON.stringify(record("there")), { mode: 0o600 });
  const ahead = (Date.now() + 20 * day) / 1000;
  utimesSync(file, ahead, ahead);
  expect(untouchedLong(file)).toBe(false);
  expect(untouchedLong(file, Date.now() + 29 * day)).toBe(false);
  expect(untouchedLong(file, Date.now() + 31 * day)).toBe(true);
});

// A machine whose clock ran 40 days behind until its network time came (a dead clock battery): a
// live core's record on the share read as 40 days ahead, set to our wrong now, and once our clock
// was put right it read as 40 days untouched: removed under its live core before its daily renewal.
test("a record far ahead of a clock behind is not expired once that clock is put right", () => {
  const day = 86_400_000;
  using dir = tmpdir();
  mkdirSync(runDir(dir.path), { recursive: true, mode: 0o700 });
  const file = pidFilePath(dir.path, 4242);
  writeFileSync(file, JSON.stringify(record("there")), { mode: 0o600 });
  const right = Date.now();
  expect(untouchedLong(file, right - 40 * day, 1000)).toBe(false);
  expect(untouchedLong(file, right, 2000)).toBe(false);
  // Its own time left as its core wrote it: 30 days unrenewed on, its core is gone.
  expect(untouchedLong(file, right + 31 * day, 3000)).toBe(true);
  // Ahead by less, its time is set to now (safe: a live core renews it within a day).
  const soon = (right + 20 * day) / 1000;
  utimesSync(file, soon, soon);
  expect(untouchedLong(file, right, 4000)).toBe(false);
  expect(untouchedLong(file, right + 31 * day, 5000)).toBe(true);
  // Far ahead, not set back: counted on this core's monotonic clock from first sight.
  const far = (right + 60 * day) / 1000;
  utimesSync(file, far, far);
  expect(untouchedLong(file, right, 6000)).toBe(false);
  expect(untouchedLong(file, right, 6000 + 29 * day)).toBe(false);
  expect(untouchedLong(file, right, 6000 + 31 * day)).toBe(true);
});
