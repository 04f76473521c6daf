import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describeLlama } from "../../src/methods/status.ts";
import type { StartProgress } from "../../src/runtime/start-progress.ts";
import type { Supervisor } from "../../src/runtime/supervisor.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { chatBody, makeSupervisor, pidAlive, waitFor } from "./helpers/harness.ts";

// Issue 11 against the stand-in subprocess: the supervisor's states as status reports them
// (stopped → starting → ready → sleeping → ready, crash → failed → restarting → ready), idle
// sleep learned off the hot path, the wake before a lease, and progress repeated on a beat.
// Learning it from /props is for builds without child mode (FAKE_LLAMA_NO_CHILD_MODE): a child
// says it sleeps itself (child-mode.test.ts).

const never = () => new AbortController().signal;
/** `llama.idle_sleep_s: 1` as planned. */
const SLEEP_1S = { idle_sleep_s: 1 };

/** How often the stand-in woke from idle sleep (a reload), as its log in `dataDir` says. */
const wakesIn = (dataDir: string) =>
  readFileSync(join(dataDir, "logs", "llama-server.log"), "utf8").split("start_loop: exiting sleeping state")
    .length - 1;

/** What status would say now. */
const stateOf = (s: Supervisor) => describeLlama(s.snapshot(), Date.now(), () => null).state;

/** Progress as heard. */
function recorder() {
  const heard: { p: StartProgress }[] = [];
  return {
    heard,
    listener: (p: StartProgress) => heard.push({ p }),
    phases: () => heard.map((h) => h.p.phase),
  };
}

async function chat(lease: { baseUrl: string; apiKey: string }) {
  const res = await fetch(`${lease.baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { Authorization: `Bearer ${lease.apiKey}` },
    body: chatBody(false),
  });
  return res.status;
}

describe.skipIf(process.platform === "win32")("idle sleep and progress, through the supervisor", () => {
  test("stopped → starting → ready → sleeping → ready: the wake comes before the lease, with waking progress", async () => {
    await using dir = tmpdir();
    const { supervisor, dataDir } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_LOAD_MS: "700", FAKE_LLAMA_NO_CHILD_MODE: "1" },
      plan: SLEEP_1S,
    });
    try {
      expect(stateOf(supervisor)).toBe("stopped");
      const first = supervisor.acquire(never());
      expect(await waitFor(() => stateOf(supervisor) === "starting")).toBe(true);
      const lease = await first;
      expect(stateOf(supervisor)).toBe("ready");
      expect(supervisor.snapshot()).toMatchObject({ idleSleepMs: 1000, sleep: "awake" });
      expect(await chat(lease)).toBe(200);
      // Held: the server is busy, nobody looks at /props and it never sleeps.
      await Bun.sleep(1500);
      expect(stateOf(supervisor)).toBe("ready");
      lease.release();

      // Idle 1 s, plus llama-server's own check (about a second): the timer learns it sleeps.
      expect(await waitFor(() => stateOf(supervisor) === "sleeping", { timeoutMs: 6000 })).toBe(true);
      expect(supervisor.snapshot().sleep).toBe("asleep");

      const progress = recorder();
      const waking = supervisor.acquire(never(), progress.listener);
      expect(await waitFor(() => supervisor.snapshot().sleep === "waking")).toBe(true);
      expect(describeLlama(supervisor.snapshot(), Date.now(), () => null)).toMatchObject({
        state: "sleeping",
        waking: true,
      });
      const again = await waking;
      // Woken before the lease: the reload was asked for (and, ready at 600 ms or later, waited for).
      expect(wakesIn(dataDir)).toBe(1);
      expect(stateOf(supervisor)).toBe("ready");
      expect(progress.phases()[0]).toBe("waking");
      expect(progress.phases().at(-1)).toBe("ready");
      // The reload takes the load time (700 ms): the wake's beat repeated "waking" meanwhile
      // (its period, fake clock and all: idle-sleep.test.ts), not a gap's milliseconds here.
      expect(progress.heard.at(-1)?.p.elapsed_ms).toBeGreaterThanOrEqual(600);
      expect(progress.phases().filter((p) => p === "waking").length).toBeGreaterThanOrEqual(2);
      for (const { p } of progress.heard)
        if ("fraction" in p && p.fraction !== undefined) expect(p.fraction).toBeWithin(0, 1.0001);
      // Awake: the chat's own request wakes nothing more (the stand-in logs each wake's reload).
      expect(await chat(again)).toBe(200);
      expect(wakesIn(dataDir)).toBe(1);
      again.release();
    } finally {
      await supervisor.stop();
    }
  }, 30_000);

  test("a lease taken once it may have fallen asleep, before the timer looked, asks /props itself and wakes it with progress", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, {
      env: { FAKE_LLAMA_LOAD_MS: "300", FAKE_LLAMA_NO_CHILD_MODE: "1" },
      plan: SLEEP_1S,
    });
    try {
      (await supervisor.acquire(never())).release();
      // Idle long enough for llama-server (1 s + its check) but before our first look (1.1 s
      // after the idle time): the lease's own look finds it asleep.
      await Bun.sleep(2050);
      const progress = recorder();
      const lease = await supervisor.acquire(never(), progress.listener);
      // Whichever looked first (the lease or, on a slow box, the timer), the wake is heard.
      expect(progress.phases()).toEqual(expect.arrayContaining(["waking", "ready"]));
      expect(await chat(lease)).toBe(200);
      lease.release();
    } finally {
      await supervisor.stop();
    }
  }, 30_000);

  test("llama-server dies while asleep: failed (the crash), and the next acquire restarts it within the budget", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { plan: SLEEP_1S });
    try {
      (await supervisor.acquire(never())).release();
      expect(await waitFor(() => stateOf(supervisor) === "sleeping", { timeoutMs: 6000 })).toBe(true);
      const pid = supervisor.pid() as number;
      process.kill(pid, "SIGKILL");
      expect(await waitFor(() => stateOf(supervisor) === "failed")).toBe(true);
      const down = describeLlama(supervisor.snapshot(), Date.now(), () => null);
      expect(down.last_error?.message).toContain("crashed");
      expect(down.restarts).toMatchObject({ used: 0, max: 2, left: 2 });

      const progress = recorder();
      const restarting = supervisor.acquire(never(), progress.listener);
      expect(await waitFor(() => stateOf(supervisor) === "restarting")).toBe(true);
      const lease = await restarting;
      expect(supervisor.pid()).not.toBe(pid);
      expect(pidAlive(pid)).toBe(false);
      expect(stateOf(supervisor)).toBe("ready");
      expect(describeLlama(supervisor.snapshot(), Date.now(), () => null).restarts).toMatchObject({
        used: 1,
        left: 1,
      });
      // The back-off first (50 ms here), then the start as ever. "loading" is not asked for: on a
      // busy machine the stand-in's short load can end before the first health check sees it.
      expect(progress.heard[0]?.p).toMatchObject({ phase: "restarting", backoff_ms: 50 });
      expect(progress.phases()).toEqual(expect.arrayContaining(["starting", "ready"]));
      expect(progress.phases().at(-1)).toBe("ready");
      expect(await chat(lease)).toBe(200);
      lease.release();
    } finally {
      await supervisor.stop();
    }
  }, 30_000);

  test("a slow load: starting, then loading again on the beat with the elapsed time, then ready", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { env: { FAKE_LLAMA_LOAD_MS: "2000" } });
    try {
      const progress = recorder();
      const lease = await supervisor.acquire(never(), progress.listener);
      const phases = progress.phases();
      expect(phases[0]).toBe("starting");
      expect(phases.at(-1)).toBe("ready");
      // Repeated by the beat (every 250 ms: idle-sleep.test.ts on a fake clock) through the 2 s
      // load, some 8 times: counted, not timed, as a stalled loop delays a beat, not drops one.
      expect(phases.filter((p) => p === "loading").length).toBeGreaterThanOrEqual(4);
      const elapsed = progress.heard.map((h) => h.p.elapsed_ms);
      expect([...elapsed].sort((a, b) => a - b)).toEqual(elapsed);
      expect(elapsed.at(-1)).toBeGreaterThanOrEqual(1900);
      lease.release();
    } finally {
      await supervisor.stop();
    }
  }, 30_000);

  test("a caller that joins a start late hears where it is at once, then the rest", async () => {
    await using dir = tmpdir();
    const { supervisor } = makeSupervisor(dir.path, { slots: 2, env: { FAKE_LLAMA_LOAD_MS: "800" } });
    try {
      const first = supervisor.acquire(never());
      expect(await waitFor(() => supervisor.snapshot().pid !== null)).toBe(true);
      await Bun.sleep(100);
      const late = recorder();
      const second = supervisor.acquire(never(), late.listener);
      await Bun.sleep(20);
      expect(late.heard.length).toBeGreaterThanOrEqual(1);
      expect(["starting", "loading"]).toContain(late.phases()[0] as string);
      const leases = await Promise.all([first, second]);
      expect(late.phases().at(-1)).toBe("ready");
      for (const l of leases) l.release();
    } finally {
      await supervisor.stop();
    }
  }, 30_000);
});
