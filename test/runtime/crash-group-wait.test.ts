import { expect, test } from "bun:test";
import type { ChildProcess, Spawner } from "../../src/runtime/spawn.ts";
import { bunSpawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

// A ready server's wrapper shell killed: the crash SIGKILLs the group its llama-server still runs
// in, but that llama-server may still be exiting, its model's memory held. The restart planned and
// spawned at once, as a stop's next start did before it waited for the group (stopChild).
test.skipIf(process.platform === "win32")(
  "a crash whose group outlives its leader: the restart spawns only once that group has ended",
  async () => {
    await using dir = tmpdir();
    let lingering = 0;
    const atSpawn: number[] = [];
    const children: ChildProcess[] = [];
    const spawner: Spawner = (req) => {
      atSpawn.push(lingering);
      const child = bunSpawner(req);
      children.push(child);
      // The group outlives its leader a few polls (a llama-server still exiting).
      return { ...child, groupLingers: () => lingering-- > 0 };
    };
    const { supervisor } = makeSupervisor(dir.path, { options: { spawner } });
    (await supervisor.acquire(never())).release();
    const [first] = children;
    if (!first) throw new Error("no spawn");
    lingering = 3;
    process.kill(first.pid, "SIGKILL");
    await first.exited;
    (await supervisor.acquire(never())).release();
    expect(atSpawn).toHaveLength(2);
    expect(atSpawn[1]).toBeLessThanOrEqual(0);
    await supervisor.stop();
  },
);
