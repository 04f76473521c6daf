import { expect, test } from "bun:test";
import { launchOnce } from "../../src/runtime/launch-steps.ts";
import { bunSpawner, type Spawner } from "../../src/runtime/spawn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { recordedPids } from "./helpers/recorded-pids.ts";

// A failed start (here abandoned: a stop during the load) killed its child and removed the pid
// record whether or not the group had ended: a wrapper's llama-server stuck in the group past the
// kill's wait (in the GPU driver) was recorded nowhere, and a core killed afterwards left it
// holding its memory and port for good (docs/supervisor.md "Orphans"). A shell's `sleep` stands in
// for the leader; `groupLingers` for the stuck member (spawn.ts).
test.skipIf(process.platform === "win32")(
  "a failed start whose group outlives the kill keeps its record until that group ends",
  async () => {
    using dir = tmpdir();
    let lingers = true;
    let pid = 0;
    const spawner: Spawner = (req) => {
      const child = bunSpawner(req);
      pid = child.pid;
      return { ...child, killWaitMs: 20, groupLingers: () => lingers };
    };
    const stop = new AbortController();
    stop.abort();
    const failure = await launchOnce(
      {
        binary: "/bin/sh",
        argv: ["-c", "exec sleep 30"],
        port: 1,
        apiKey: "k".repeat(64),
        env: process.env,
        spawner,
        dataDir: dir.path,
        onLine: () => {},
      },
      { startupTimeoutMs: 10_000, intervalMs: 10, signal: stop.signal, emit: () => {} },
    );
    expect("error" in failure).toBe(true);
    expect(recordedPids(dir.path)).toEqual([pid]);
    lingers = false;
    expect(await waitFor(() => recordedPids(dir.path).length === 0, { intervalMs: 10 })).toBe(true);
  },
);
