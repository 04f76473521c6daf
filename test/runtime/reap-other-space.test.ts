import { expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { spaceOf } from "../../src/platform/pid-space.ts";
import { type PidRecord, pidFilePath, reapLeftover, runDir } from "../../src/runtime/pid-file.ts";
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
): Promise<{ actions: string[]; kept: boolean }> {
  using dir = tmpdir();
  mkdirSync(runDir(dir.path), { recursive: true, mode: 0o700 });
  const file = pidFilePath(dir.path, r.owner.pid);
  writeFileSync(file, JSON.stringify(r), { mode: 0o600 });
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
