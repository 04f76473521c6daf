import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { spaceOf } from "../../src/platform/pid-space.ts";
import type { ProcReader } from "../../src/platform/process-tree.ts";
import { groupMembers } from "../../src/runtime/leftover-stop.ts";
import { type PidRecord, pidFilePath, reapLeftover } from "../../src/runtime/pid-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/**
 * A `llama.binary` wrapper that does not `exec` (`/bin/sh wrapper` → llama-server in its group):
 * the shell died and llama-server stayed, stuck, holding the model's memory and the port. The
 * record names the shell; its `members` name llama-server. Processes here are fakes: a table of
 * pid → start time that the injected `kill` edits.
 */
const WRAPPER = "/opt/llama/wrapper.sh";
const LEADER = 4100;
const SERVER = 4101;
const OWNER = 4000;

function fakeProcs(
  running: Record<number, string>,
  ignores: NodeJS.Signals[] = [],
  groups: Record<number, number> = {},
) {
  const signals: [number, NodeJS.Signals | 0][] = [];
  return {
    signals,
    alive: (pid: number) => pid in running,
    // Each process in the recorded leader's group unless `groups` says otherwise.
    groupOf: (pid: number) => (pid in running ? (groups[pid] ?? LEADER) : null),
    identity: (pid: number) => {
      const start = running[pid];
      return start === undefined ? null : { start_time: start, cmdline: "llama-server --port 8080" };
    },
    kill: (pid: number, signal: NodeJS.Signals | 0) => {
      if (!(pid in running)) throw Object.assign(new Error("no such process"), { code: "ESRCH" });
      signals.push([pid, signal]);
      if (signal !== 0 && !ignores.includes(signal)) delete running[pid];
    },
  };
}

function writeRecord(data: string, over: Partial<PidRecord> = {}): string {
  const record: PidRecord = {
    kind: "llama-server",
    pid: LEADER,
    start_time: "1000",
    cmdline: `/bin/sh ${WRAPPER} --port 8080`,
    binary: WRAPPER,
    argv: ["--port", "8080"],
    port: 8080,
    group: true,
    members: [{ pid: SERVER, start_time: "1001" }],
    owner: { pid: OWNER, start_time: "900" },
    written_at: new Date().toISOString(),
    ...over,
  };
  mkdirSync(join(data, "run"), { recursive: true });
  const file = pidFilePath(data, OWNER);
  writeFileSync(file, JSON.stringify(record));
  return file;
}

const reap = (data: string, procs: ReturnType<typeof fakeProcs>, configured = [WRAPPER]) =>
  reapLeftover(data, { configured: { "llama-server": configured }, graceMs: 0, ...procs });

describe("a wrapper's llama-server left in the group after its shell died", () => {
  test("is stopped by its recorded start time, and the record goes", async () => {
    await using dir = tmpdir();
    const file = writeRecord(dir.path);
    const procs = fakeProcs({ [SERVER]: "1001" });
    const outcomes = await reap(dir.path, procs);
    expect(outcomes).toEqual([
      { file, kind: "llama-server", action: "stopped", pid: LEADER, signal: "SIGTERM", members: [SERVER] },
    ]);
    expect(procs.signals).toEqual([[SERVER, "SIGTERM"]]);
    expect(existsSync(file)).toBe(false);
  });

  // A record of this core's pid space read in part (a passing EMFILE on the boot id; its core
  // died during the load): its process is stopped once shown the very one (pid-file.ts
  // `reapIfShown`), but a wrapper's shell gone left its stuck llama-server running for good, its
  // record kept as another space's. Its members are shown by their start time and group as ever;
  // none running, the record stays another space's (its leader's pid says nothing here).
  test("of a record whose space was read in part, is stopped too; none running, the record stays", async () => {
    const ns = "pid:[4026531836]";
    const owner = { pid: OWNER, start_time: "900", space: spaceOf("box", "", ns) };
    const space = spaceOf("box", "boot-1", ns);
    await using dir = tmpdir();
    const file = writeRecord(dir.path, { owner });
    const procs = fakeProcs({ [SERVER]: "1001" });
    const opts = { configured: { "llama-server": [WRAPPER] }, graceMs: 0, space };
    expect((await reapLeftover(dir.path, { ...opts, ...procs })).map((o) => o.action)).toEqual(["stopped"]);
    expect(procs.signals).toEqual([[SERVER, "SIGTERM"]]);
    expect(existsSync(file)).toBe(false);
    writeRecord(dir.path, { owner });
    const none = fakeProcs({});
    expect((await reapLeftover(dir.path, { ...opts, ...none })).map((o) => o.action)).toEqual([
      "other_space",
    ]);
    expect(existsSync(file)).toBe(true);
  });

  test("one that ignores SIGTERM gets the SIGKILL", async () => {
    await using dir = tmpdir();
    writeRecord(dir.path);
    const procs = fakeProcs({ [SERVER]: "1001" }, ["SIGTERM"]);
    const [o] = await reap(dir.path, procs);
    expect(o && "signal" in o ? o.signal : o?.action).toBe("SIGKILL");
    expect(procs.signals).toEqual([
      [SERVER, "SIGTERM"],
      [SERVER, "SIGKILL"],
    ]);
  });

  // The kernel reuses no pid that is still a group's id: the leader's pid reused, its group has
  // ended, and a process in a group of that id is in the newcomer's (a forged record could name
  // any of them, start times and all). It was stopped.
  test("the leader's pid reused by another process: neither it nor its group's processes are signalled", async () => {
    await using dir = tmpdir();
    writeRecord(dir.path);
    const procs = fakeProcs({ [LEADER]: "7777", [SERVER]: "1001" });
    expect((await reap(dir.path, procs)).map((o) => o.action)).toEqual(["not_ours"]);
    expect(procs.signals).toEqual([]);
  });

  // A record is a file any program of this user's can write (or a stale one garbled): its members
  // name a pid and a start time, both readable by anyone for any process. Only the start time was
  // checked, so a record could have the core signal itself, its host, or any process of the user's.
  test.each([
    ["the core itself", process.pid, LEADER],
    ["the core's parent (the host app)", process.ppid, LEADER],
    ["a process in another group", SERVER, 4999],
  ])("a member naming %s is never signalled", async (_, pid, group) => {
    await using dir = tmpdir();
    const file = writeRecord(dir.path, { members: [{ pid, start_time: "1001" }] });
    const procs = fakeProcs({ [pid]: "1001" }, [], { [pid]: group });
    expect((await reap(dir.path, procs)).map((o) => o.action)).toEqual(["gone"]);
    expect(procs.signals).toEqual([]);
    expect(existsSync(file)).toBe(false);
  });

  test.each([
    ["a member's pid reused (another start time) is never signalled", {}, "5555"],
    [
      "a record without members (off Linux, or older) keeps today's behaviour",
      { members: undefined },
      "1001",
    ],
  ] as const)("%s: the record is stale and goes", async (_, over, serverStart) => {
    await using dir = tmpdir();
    const file = writeRecord(dir.path, over);
    const procs = fakeProcs({ [SERVER]: serverStart });
    expect((await reap(dir.path, procs)).map((o) => o.action)).toEqual(["gone"]);
    expect(procs.signals).toEqual([]);
    expect(existsSync(file)).toBe(false);
  });

  test("a record of a program this core does not run: its members left alone, the record kept", async () => {
    await using dir = tmpdir();
    const file = writeRecord(dir.path);
    const procs = fakeProcs({ [SERVER]: "1001" });
    const [o] = await reap(dir.path, procs, ["/usr/bin/llama-server"]);
    expect(o?.action).toBe("unexplained");
    expect(procs.signals).toEqual([]);
    expect(existsSync(file)).toBe(true);
  });

  test("one still there after the SIGKILL (stuck in the driver): failed, the record kept for the next start", async () => {
    await using dir = tmpdir();
    const file = writeRecord(dir.path);
    const procs = fakeProcs({ [SERVER]: "1001" }, ["SIGTERM", "SIGKILL"]);
    const [o] = await reapLeftover(dir.path, {
      configured: { "llama-server": [WRAPPER] },
      graceMs: 0,
      killWaitMs: 0,
      ...procs,
    });
    expect(o?.action).toBe("failed");
    expect(existsSync(file)).toBe(true);
  });

  test("members that are no pid of a process (0, -1, 1) make the record unreadable: nothing signalled", async () => {
    await using dir = tmpdir();
    for (const pid of [0, -1, 1]) {
      writeRecord(dir.path, { members: [{ pid, start_time: "1" }] });
      const procs = fakeProcs({ [SERVER]: "1001", [pid]: "1" });
      expect((await reap(dir.path, procs)).map((o) => o.action)).toEqual(["unreadable"]);
      expect(procs.signals).toEqual([]);
    }
  });
});

describe("groupMembers", () => {
  const table: ProcReader = {
    list: () => [
      { pid: LEADER, ppid: OWNER, pgid: LEADER, start: "1000" },
      { pid: SERVER, ppid: LEADER, pgid: LEADER, start: "1001" },
      // A daemon that left the group (setsid): a group signal never reached it either.
      { pid: 4102, ppid: SERVER, pgid: 4102, start: "1002" },
      { pid: 4200, ppid: OWNER, pgid: 4200, start: "1003" },
    ],
    startOf: () => null,
  };

  test("the leader's descendants still in its group, with their start times", () => {
    expect(groupMembers(LEADER, table)).toEqual([{ pid: SERVER, start_time: "1001" }]);
  });

  test("without /proc none are listed", () => {
    expect(groupMembers(LEADER, null)).toBeUndefined();
  });
});
