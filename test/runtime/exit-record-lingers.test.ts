import { expect, test } from "bun:test";
import type { ChildProcess, Spawner } from "../../src/runtime/spawn.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { makeSupervisor } from "./helpers/harness.ts";
import { recordedPids } from "./helpers/recorded-pids.ts";

const never = () => new AbortController().signal;

/**
 * A supervisor whose child's group lingers (spawn.ts `groupLingers`: a wrapper's shell reaped, its
 * llama-server stuck in the GPU driver) while `lingers.now`; each kill waits 20 ms, not 5 s.
 */
function lingeringSupervisor(dir: string) {
  const lingers = { now: false };
  const children: ChildProcess[] = [];
  const spawner: Spawner = (req) => {
    const child = bunSpawner(req);
    children.push(child);
    return { ...child, killWaitMs: 20, groupLingers: () => lingers.now };
  };
  const h = makeSupervisor(dir, { settings: { stopGraceMs: 20 }, options: { spawner } });
  return { ...h, lingers, children };
}

// The exit handler (supervisor.ts onExit) removed the record as soon as the shell exited, before
// the stop's own recordAfterStop could keep it aside: a llama-server stuck in the group was then
// recorded nowhere, so once the core was killed no later core reaped it (docs/supervisor.md
// "Orphans") and it held its memory and port for good.
test.skipIf(process.platform === "win32")(
  "a stop whose group lingers after the shell's exit keeps the record until that group ends",
  async () => {
    await using dir = tmpdir();
    const { supervisor, dataDir, lingers, children } = lingeringSupervisor(dir.path);
    (await supervisor.acquire(never())).release();
    const pid = children[0]?.pid;
    lingers.now = true;
    await supervisor.stop();
    expect(recordedPids(dataDir)).toEqual([pid as number]);
    lingers.now = false;
    expect(await waitFor(() => recordedPids(dataDir).length === 0, { intervalMs: 10 })).toBe(true);
  },
);

// The same from a crash: the shell killed while ready, its llama-server left in the group. The
// record went at once; the restart then wrote its own, and nothing named the stuck one.
test.skipIf(process.platform === "win32")(
  "a crash whose group lingers keeps the old record beside the restart's",
  async () => {
    await using dir = tmpdir();
    const { supervisor, dataDir, lingers, children } = lingeringSupervisor(dir.path);
    (await supervisor.acquire(never())).release();
    const first = children[0] as ChildProcess;
    lingers.now = true;
    process.kill(first.pid, "SIGKILL");
    await first.exited;
    await Bun.sleep(0);
    expect(recordedPids(dataDir)).toContain(first.pid);
    lingers.now = false;
    await supervisor.stop();
    expect(await waitFor(() => recordedPids(dataDir).length === 0, { intervalMs: 10 })).toBe(true);
  },
);
