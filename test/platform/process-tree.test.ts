import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runWithTimeout } from "../../src/plan/probe.ts";
import {
  descendantsByChildren,
  descendantsOf,
  linuxProc,
  MAX_DESCENDANTS,
  type ProcReader,
  signalSame,
} from "../../src/platform/process-tree.ts";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

/** A process table of [pid, ppid] (each its own group, started at tick 100). */
const table = (pairs: [number, number][]): ProcReader => ({
  list: () => pairs.map(([pid, ppid]) => ({ pid, ppid, pgid: pid, start: "100" })),
  startOf: (pid) => (pairs.some(([p]) => p === pid) ? "100" : null),
});
const pids = (proc: ProcReader, pid: number) => descendantsOf(pid, proc).map((e) => e.pid);

describe("descendantsOf", () => {
  test("children and grandchildren, not siblings or the parent", () => {
    const proc = table([
      [10, 1],
      [11, 10],
      [12, 10],
      [13, 11],
      [20, 1],
      [21, 20],
    ]);
    expect(pids(proc, 10).sort()).toEqual([11, 12, 13]);
    expect(pids(proc, 13)).toEqual([]);
  });

  test("a tree past MAX_DESCENDANTS is read up to it: a server forking without end holds no look for long", () => {
    const pairs: [number, number][] = Array.from({ length: MAX_DESCENDANTS + 500 }, (_, i) => [1000 + i, 10]);
    const found = pids(table(pairs), 10);
    expect(found).toHaveLength(MAX_DESCENDANTS);
    expect(found[0]).toBe(1000);
  });

  test("a cycle in what was read ends the walk", () => {
    expect(
      pids(
        table([
          [6, 5],
          [5, 6],
        ]),
        5,
      ),
    ).toEqual([6]);
  });
});

describe.skipIf(process.platform !== "linux")("descendantsByChildren", () => {
  test("the same tree as a listing of every process, read through the kernel's children lists", async () => {
    // A shell with a child and a grandchild (one in a session of its own), the shell waiting.
    const proc = Bun.spawn(["/bin/sh", "-c", "sh -c 'setsid sleep 30 & sleep 30' & wait"], {
      stdio: ["ignore", "ignore", "ignore"],
    });
    try {
      expect(await waitFor(() => descendantsOf(proc.pid).length >= 3)).toBe(true);
      // A reader that is not linuxProc itself: descendantsOf then walks a listing of every process.
      const listing: ProcReader = { list: () => linuxProc.list(), startOf: (p) => linuxProc.startOf(p) };
      const byList = descendantsOf(proc.pid, listing)
        .map((e) => e.pid)
        .sort();
      const byChildren = descendantsByChildren(proc.pid);
      expect(byChildren?.map((e) => e.pid).sort()).toEqual(byList);
      expect(descendantsByChildren(proc.pid, 1)).toHaveLength(1);
    } finally {
      for (const e of descendantsOf(proc.pid)) process.kill(e.pid, "SIGKILL");
      proc.kill("SIGKILL");
    }
    expect(descendantsByChildren(2 ** 22 + 1)).toBeNull();
  });
});

describe.skipIf(process.platform !== "linux")("signalSame", () => {
  test("signals a process still the one seen, not one whose pid came back with a later start", async () => {
    const child = Bun.spawn(["sleep", "30"]);
    const [seen] = descendantsOf(process.pid).filter((e) => e.pid === child.pid);
    expect(seen?.ppid).toBe(process.pid);
    // The same pid started later: not the process that was seen, so it is left alone.
    expect(signalSame([{ ...seen!, start: String(Number(seen!.start) - 1) }], "SIGKILL")).toBe(0);
    expect(child.exitCode).toBeNull();
    expect(signalSame([seen!], "SIGKILL")).toBe(1);
    expect(await child.exited).toBe(137);
    expect(signalSame([seen!], "SIGKILL")).toBe(0);
  });
});

// docs/doctor.md: a probe (`llama-server --version`, `--help`) that does not answer in time is
// killed with what it started. A wrapper script that runs the binary without `exec` left it
// running after the script was killed.
describe.skipIf(process.platform !== "linux")("a probe that times out", () => {
  test("takes the wrapper script's own child with it", async () => {
    await using dir = tmpdir();
    const pidFile = join(dir.path, "child.pid");
    const script = join(dir.path, "llama-server");
    await Bun.write(script, `#!/bin/sh\nsleep 30 &\necho $! > '${pidFile}'\nwait\n`);
    Bun.spawnSync(["chmod", "+x", script]);
    const r = await runWithTimeout(script, ["--version"], 500);
    expect(r.kind).toBe("timeout");
    const child = Number(readFileSync(pidFile, "utf8"));
    expect(child).toBeGreaterThan(0);
    // Gone or a zombie (isAlive): orphaned by the script's kill, it is init's to collect, ~1.5 s on
    // this box's container, though dead at once.
    expect(await waitFor(() => !isAlive(child), { timeoutMs: 2000, intervalMs: 5 })).toBe(true);
  });
});
