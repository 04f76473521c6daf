import { describe, expect, test } from "bun:test";
import type { GroupEntry, GroupProcReader } from "../../src/platform/group-live.ts";
import { type StopDeps, stopLeftover } from "../../src/runtime/leftover-stop.ts";

/**
 * A leftover wrapper's group at the start-up reap (docs/supervisor.md "Orphans"): the shell (the
 * recorded leader) dies of the SIGTERM, its llama-server too, but that one, orphaned, is init's to
 * collect, and on this box's container (pid 1 no real init) it stayed a zombie ~1.5 s: kill(-pgid, 0)
 * still succeeded all that while. Fakes: a table of processes, each with its group and state.
 */
const LEADER = 5100;
const SERVER = 5101;

function fakeGroup(serverIgnoresTerm = false) {
  const procs = new Map<number, GroupEntry>([
    [LEADER, { pid: LEADER, pgid: LEADER, state: "S" }],
    [SERVER, { pid: SERVER, pgid: LEADER, state: "S" }],
  ]);
  const signals: [number, NodeJS.Signals | 0][] = [];
  const proc: GroupProcReader = {
    list: () => procs.values(),
    entry: (pid) => procs.get(pid) ?? null,
    tasks: (pid) => (procs.has(pid) ? [pid] : []),
  };
  const deps: StopDeps = {
    graceMs: 1000,
    killWaitMs: 1000,
    alive: (pid) => procs.has(pid) && procs.get(pid)?.state !== "Z",
    startOf: () => "1000",
    groupOf: (pid) => procs.get(pid)?.pgid ?? null,
    kill: (pid, signal) => {
      const hit = [...procs.values()].filter((e) => (pid < 0 ? e.pgid === -pid : e.pid === pid));
      if (hit.length === 0) throw Object.assign(new Error("no such process"), { code: "ESRCH" });
      signals.push([pid, signal]);
      if (signal === 0) return;
      // The leader, our dead core's child, is collected by nobody here either: it is gone. Its
      // llama-server dies of the signal but stays a zombie, init not collecting it yet.
      procs.delete(LEADER);
      const server = procs.get(SERVER);
      if (server && (signal === "SIGKILL" || !serverIgnoresTerm)) server.state = "Z";
    },
    groupProc: proc,
    driveAnswers: async () => true,
  };
  return { deps, signals, procs };
}

describe("the start-up reap of a wrapper's group whose llama-server is a zombie", () => {
  test("is stopped by the SIGTERM at once: no grace waited, no SIGKILL", async () => {
    const { deps, signals } = fakeGroup();
    // Without the zombie check it waited the whole grace (1 s here, 3 s in production), then killed.
    expect(await stopLeftover(LEADER, true, deps)).toEqual({ action: "stopped", signal: "SIGTERM" });
    expect(signals.filter(([, s]) => s !== 0)).toEqual([[-LEADER, "SIGTERM"]]);
  });

  test("a llama-server that ignores the SIGTERM still runs: it gets the SIGKILL", async () => {
    const { deps, signals } = fakeGroup(true);
    deps.graceMs = 0;
    expect(await stopLeftover(LEADER, true, deps)).toEqual({ action: "stopped", signal: "SIGKILL" });
    expect(signals.filter(([, s]) => s !== 0)).toEqual([
      [-LEADER, "SIGTERM"],
      [-LEADER, "SIGKILL"],
    ]);
  });
});
