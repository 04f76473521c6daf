import { describe, expect, test } from "bun:test";
import {
  type GroupEntry,
  type GroupProcReader,
  groupLiveProbe,
  procShowsAll,
} from "../../src/platform/group-live.ts";

const PGID = 7100;

/** A fake /proc: the entries given, `threads` the live threads of a leader that exited; counts listings. */
function fakeProc(entries: GroupEntry[], threads: Record<number, number[]> = {}) {
  const procs = new Map(entries.map((e) => [e.pid, e]));
  let listings = 0;
  const proc: GroupProcReader = {
    list: () => {
      listings++;
      return procs.values();
    },
    entry: (pid) => procs.get(pid) ?? null,
    tasks: (pid) => (procs.has(pid) ? [pid, ...(threads[pid] ?? [])] : []),
  };
  return { proc, procs, listings: () => listings };
}

/** kill(-pgid, 0) as the kernel answers it: success while any member exists, zombies included. */
const killOver = (procs: Map<number, GroupEntry>) => (pid: number) => {
  if (![...procs.values()].some((e) => (pid < 0 ? e.pgid === -pid : e.pid === pid)))
    throw Object.assign(new Error("no such process"), { code: "ESRCH" });
};

describe("whether a process group still has a member that runs", () => {
  test("members all zombies (init not collecting them yet): gone", () => {
    const { proc, procs } = fakeProc([
      { pid: 7101, pgid: PGID, state: "Z" },
      { pid: 7102, pgid: PGID, state: "X" },
      { pid: 7200, pgid: 7200, state: "S" },
    ]);
    expect(groupLiveProbe(killOver(procs), proc)(PGID)).toBe(false);
  });

  test("a member that runs or sleeps, beside zombies: still there", () => {
    const { proc, procs } = fakeProc([
      { pid: 7101, pgid: PGID, state: "Z" },
      { pid: 7102, pgid: PGID, state: "D" },
    ]);
    expect(groupLiveProbe(killOver(procs), proc)(PGID)).toBe(true);
  });

  test("a leader that exited while its threads run shows Z: still there", () => {
    const { proc, procs } = fakeProc([{ pid: 7101, pgid: PGID, state: "Z" }], { 7101: [7105] });
    expect(groupLiveProbe(killOver(procs), proc)(PGID)).toBe(true);
  });

  test("no member at all: gone, without reading /proc", () => {
    const { proc, procs, listings } = fakeProc([{ pid: 7200, pgid: 7200, state: "S" }]);
    expect(groupLiveProbe(killOver(procs), proc)(PGID)).toBe(false);
    expect(listings()).toBe(0);
  });

  test("the signal reaches a member /proc does not show (hidden, or ended since): kill's answer stands", () => {
    const { proc } = fakeProc([]);
    expect(groupLiveProbe(() => {}, proc)(PGID)).toBe(true);
  });

  test("without /proc (not Linux): kill's answer, zombies or not", () => {
    expect(groupLiveProbe(() => {}, null)(PGID)).toBe(true);
  });

  test("a member that lingers is read alone at each poll, every process listed only once", () => {
    const { proc, procs, listings } = fakeProc([
      { pid: 7101, pgid: PGID, state: "S" },
      { pid: 7102, pgid: PGID, state: "Z" },
    ]);
    const live = groupLiveProbe(killOver(procs), proc);
    for (let i = 0; i < 5; i++) expect(live(PGID)).toBe(true);
    expect(listings()).toBe(1);
    // It ends, a zombie too: listed again, and the group is gone.
    (procs.get(7101) as GroupEntry).state = "Z";
    expect(live(PGID)).toBe(false);
    expect(listings()).toBe(2);
  });

  test("a remembered member's pid now another group's: listed again", () => {
    const { proc, procs } = fakeProc([{ pid: 7101, pgid: PGID, state: "S" }]);
    const live = groupLiveProbe(killOver(procs), proc);
    expect(live(PGID)).toBe(true);
    procs.set(7101, { pid: 7101, pgid: 7101, state: "S" });
    procs.set(7102, { pid: 7102, pgid: PGID, state: "Z" });
    expect(live(PGID)).toBe(false);
  });

  test("a group /proc shows no member of at a poll: kill's answer from then on, /proc not listed at each poll", () => {
    // A member hidden from /proc (hidepid, a /proc of another pid namespace) lingering its whole
    // wait: a listing of every process at each 50 ms poll for up to 60 s held the main loop.
    const { proc, listings } = fakeProc([{ pid: 7200, pgid: 7200, state: "S" }]);
    const live = groupLiveProbe(() => {}, proc);
    for (let i = 0; i < 20; i++) expect(live(PGID)).toBe(true);
    expect(listings()).toBe(1);
  });

  test("a /proc that hides processes (hidepid): a visible zombie is not the whole group, kill's answer stands", () => {
    // hidepid=2 shows only this user's processes: a member of another user's (a wrapper's
    // setuid helper) still running beside the zombie was counted gone, its group left unkilled.
    const { proc, procs } = fakeProc([{ pid: 7101, pgid: PGID, state: "Z" }]);
    const live = groupLiveProbe(killOver(procs), { ...proc, whole: () => false });
    expect(live(PGID)).toBe(true);
  });

  test("whether this /proc shows every process: hidepid, or another pid namespace's, does not", () => {
    const line = (opts: string) => `22 27 0:21 / /proc rw,relatime - proc proc ${opts}\n`;
    expect(procShowsAll(line("rw"), String(process.pid))).toBe(true);
    expect(procShowsAll(line("rw,hidepid=0"), String(process.pid))).toBe(true);
    expect(procShowsAll(line("rw,hidepid=off"), String(process.pid))).toBe(true);
    expect(procShowsAll(line("rw,hidepid=2"), String(process.pid))).toBe(false);
    expect(procShowsAll(line("rw,hidepid=invisible,gid=4"), String(process.pid))).toBe(false);
    expect(procShowsAll(line("rw,hidepid=noaccess"), String(process.pid))).toBe(false);
    expect(procShowsAll(line("rw"), "1")).toBe(false); // /proc/self another namespace's pid
    expect(procShowsAll(line("rw"), null)).toBe(false);
    expect(procShowsAll(null, String(process.pid))).toBe(false);
  });

  test("a group whose members the signal may not reach (EPERM: another user's) still exists", () => {
    // kill(-pgid, 0) fails EPERM where members exist but none is this user's (a wrapper's setuid
    // llama-server): counted gone, its stop reported done and its record dropped while it ran.
    const eperm = () => {
      throw Object.assign(new Error("operation not permitted"), { code: "EPERM" });
    };
    expect(groupLiveProbe(eperm, null)(PGID)).toBe(true);
    expect(groupLiveProbe(eperm, fakeProc([]).proc)(PGID)).toBe(true);
  });
});
