import { expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { readRecord, runDir } from "../../src/runtime/pid-file.ts";
import type { ChildProcess, Spawner } from "../../src/runtime/spawn.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

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

/** The pids that this data directory's llama-server records name. */
function recordedPids(dataDir: string): number[] {
  const names = readdirSync(runDir(dataDir)).filter((n) => n.endsWith(".json"));
  return names.map((n) => (readRecord(join(runDir(dataDir), n), undefined) as { pid: number }).pid);
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await Bun.sleep(10);
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
    await until(() => recordedPids(dataDir).length === 0);
    expect(recordedPids(dataDir)).toEqual([]);
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
    await until(() => recordedPids(dataDir).length === 0);
    expect(recordedPids(dataDir)).toEqual([]);
  },
);
