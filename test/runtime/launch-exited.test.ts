import { expect, test } from "bun:test";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, pidAlive } from "./helpers/harness.ts";

// A parked zeroing of a KV file waits for its server's exit (agent/kv/slot-clear.ts `exitSeen`):
// `died` is told as the stop begins, the process still ending the slot task it runs. So `exited`
// must be the child's own exit, not `died`. The stand-in ignores SIGTERM: alive through its grace.
test.skipIf(process.platform === "win32")(
  "a launch's exited is told once its process is gone, not when its stop begins",
  async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_IGNORE_SIGTERM: "1" },
      settings: { stopGraceMs: 300 },
    });
    const lease = await supervisor.acquire(new AbortController().signal);
    const { launch } = lease;
    const pid = supervisor.pid() as number;
    let exited = false;
    void launch.exited.then(() => {
      exited = true;
    });
    let atDeath: { exited: boolean; alive: boolean } | undefined;
    launch.died.addEventListener("abort", () => {
      atDeath = { exited, alive: pidAlive(pid) };
    });
    lease.release();
    const stopped = supervisor.stop();
    await launch.exited;
    expect(atDeath).toEqual({ exited: false, alive: true });
    expect(pidAlive(pid)).toBe(false);
    await stopped;
  },
);
