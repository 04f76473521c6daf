import { describe, expect, test } from "bun:test";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { makeSupervisor, schedulerOver, waitFor } from "./helpers/harness.ts";

const never = () => new AbortController().signal;

/**
 * Several models (docs/supervisor.md, "Restart rate"): `models.load` is the host's ask, as a
 * warmup is. A loaded model whose llama-server crashed while a lease was out stays `loaded`
 * while a chat restarts it in its back-off: the load must not answer before it serves.
 */
describe.skipIf(process.platform === "win32")("models.load of a loaded model restarting", () => {
  test("ends the chat's back-off and answers once the server serves again", async () => {
    await using dir = tmpdir();
    // A back-off (capped at 30 s) longer than this test's time: only the host's ask ends it.
    const { supervisor } = makeSupervisor(dir.path, {
      slots: 2,
      settings: { maxRestarts: 3, restartBackoffMs: 60_000 },
    });
    const scheduler = schedulerOver(() => supervisor);
    try {
      // A chat's lease, still out when its server dies: the model stays loaded.
      const first = await scheduler.acquire("a", never());
      process.kill(supervisor.pid() as number, "SIGKILL");
      expect(await waitFor(() => first.died.aborted)).toBe(true);
      // The next chat begins the restart, which waits out its back-off.
      const backingOff = Promise.withResolvers<void>();
      const chat = scheduler.acquire("a", never(), (p) => {
        if (p.phase === "restarting" && "backoff_ms" in p) backingOff.resolve();
      });
      await backingOff.promise;
      expect(supervisor.currentState()).toBe("starting");
      const loaded = await scheduler.load("a");
      expect(loaded.state).toBe("loaded");
      expect(supervisor.currentState()).toBe("ready");
      (await chat).release();
      first.release();
    } finally {
      await scheduler.stop();
    }
  }, 10_000);
});
