import { expect, test } from "bun:test";
import type { ChildProcess, Spawner } from "../../src/runtime/spawn.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

/**
 * A ready server whose wrapper shell is then SIGKILLed, its group outliving it a few polls (a
 * llama-server still exiting); `lingering()` is the polls left, `atSpawn` what they were at each spawn.
 */
async function crashedWithLingeringGroup(dataDir: string) {
  let lingering = 0;
  const atSpawn: number[] = [];
  const children: ChildProcess[] = [];
  const spawner: Spawner = (req) => {
    atSpawn.push(lingering);
    const child = bunSpawner(req);
    children.push(child);
    return { ...child, groupLingers: () => lingering-- > 0 };
  };
  const { supervisor } = makeSupervisor(dataDir, { options: { spawner } });
  (await supervisor.acquire(never())).release();
  const [first] = children;
  if (!first) throw new Error("no spawn");
  lingering = 3;
  process.kill(first.pid, "SIGKILL");
  await first.exited;
  return { supervisor, atSpawn, lingering: () => lingering };
}

// A ready server's wrapper shell killed: the crash SIGKILLs the group its llama-server still runs
// in, but that llama-server may still be exiting, its model's memory held. The restart planned and
// spawned at once, as a stop's next start did before it waited for the group (stopChild).
test.skipIf(process.platform === "win32")(
  "a crash whose group outlives its leader: the restart spawns only once that group has ended",
  async () => {
    await using dir = tmpdir();
    const { supervisor, atSpawn } = await crashedWithLingeringGroup(dir.path);
    (await supervisor.acquire(never())).release();
    expect(atSpawn).toHaveLength(2);
    expect(atSpawn[1]).toBeLessThanOrEqual(0);
    await supervisor.stop();
  },
);

// The same crash, then a stop (the core shutting down, or several models unloading the crashed
// one to make room for another): it returned at once, the group still holding that memory.
test.skipIf(process.platform === "win32")(
  "a stop after a crash whose group outlives its leader returns only once that group has ended",
  async () => {
    await using dir = tmpdir();
    const { supervisor, atSpawn, lingering } = await crashedWithLingeringGroup(dir.path);
    await supervisor.stop();
    expect(lingering()).toBeLessThanOrEqual(0);
    expect(atSpawn).toHaveLength(1);
  },
);
