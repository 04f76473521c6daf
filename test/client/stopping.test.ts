import { afterEach, describe, expect, jest, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { LocalAiClient } from "../../src/client/index.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { isAlive, killFakes, pidWhenWritten, startFake, track } from "./fake-core-fixture.ts";

// How the client stops a core, against the fake core (fake-core.mjs).
afterEach(killFakes);

describe("stopping the core", () => {
  test("a second close() while the first runs waits for it instead of killing the core", async () => {
    // Electron's window-all-closed and before-quit may both close the client: the second call
    // must not SIGKILL a core still stopping a child that ignores SIGTERM (docs/bootstrap.md).
    await using dir = tmpdir();
    const pidFile = join(dir.path, "child.pid");
    const exits: { expected: boolean; code: number | null; signal: string | null }[] = [];
    const warnings: string[] = [];
    const client = await startFake(
      { onExit: (i) => exits.push(i), logger: { warn: (m) => warnings.push(m) } },
      { FAKE_CORE_CHILD_GRACE_MS: "1500", FAKE_CORE_CHILD_PID: pidFile },
    );
    const childPid = await pidWhenWritten(pidFile);
    try {
      const first = client.close({ timeoutMs: 100 });
      await Bun.sleep(100);
      const second = client.close({ timeoutMs: 100 });
      await Promise.all([first, second]);
      expect(exits).toEqual([expect.objectContaining({ expected: true, code: 0, signal: null })]);
      expect(isAlive(childPid)).toBe(false);
      expect(warnings).toEqual([]);
      // Once it has stopped, further calls resolve at once.
      const started = Date.now();
      await client.shutdown();
      await client.close();
      // Far under the 5 s a stop would wait for a core: a loaded machine stays well within it.
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      if (isAlive(childPid)) process.kill(childPid, "SIGKILL");
    }
  }, 20_000);

  test("close() during a restart's back-off leaves no timer holding the host's process open", async () => {
    // The host closes the client as it quits: its process must end then, not when the pending
    // restart delay (up to maxDelayMs) runs out.
    await using dir = tmpdir();
    const host = join(dir.path, "host.ts");
    writeFileSync(
      host,
      `import { LocalAiClient } from ${JSON.stringify(join(import.meta.dir, "../../src/client/index.ts"))};
import { FakeChild } from ${JSON.stringify(join(import.meta.dir, "fake-child.ts"))};
const child = new FakeChild();
const client = await LocalAiClient.start({
  binary: "local-ai",
  spawn: child.spawn,
  restart: { initialDelayMs: 8000 },
  onRestart: () => setTimeout(() => void client.close().then(() => console.log("closed")), 100),
});
child.exit(1, null);
`,
    );
    const started = Date.now();
    const run = Bun.spawnSync([process.execPath, host], { stdout: "pipe", stderr: "pipe", timeout: 15_000 });
    expect(run.stdout.toString() + run.stderr.toString()).toBe("closed\n");
    expect(Date.now() - started).toBeLessThan(4000);
  }, 20_000);

  test("close({ timeoutMs: NaN }) still kills a core that never answers, after the default wait", async () => {
    // NaN (a timeout read from a setting with Number()) made the shutdown request's wait
    // unbounded: an app quitting on a hung core never finished quitting.
    const child = new FakeChild();
    child.exitOnEof = false;
    const exits: { expected: boolean; signal: string | null }[] = [];
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        stopGraceMs: 0,
        onExit: (i) => exits.push(i),
      }),
    );
    const started = Date.now();
    const how = await Promise.race([
      client.close({ timeoutMs: Number.NaN }).then(() => "closed"),
      Bun.sleep(9000).then(() => "hung"),
    ]);
    expect(how).toBe("closed");
    // Not sooner than the default 5 s either: the core may still be stopping llama-server.
    expect(Date.now() - started).toBeGreaterThanOrEqual(4900);
    expect(exits).toEqual([expect.objectContaining({ expected: true, signal: "SIGKILL" })]);
  }, 20_000);
});

describe("stopping a core that is still starting", () => {
  test("shutdown() resolves once the core it killed has exited, not before", async () => {
    // A host that deletes the data folder or starts another client once shutdown() resolved
    // raced a core still running.
    const child = new FakeChild();
    child.readDelayMs = 200;
    const exits: { expected: boolean; signal: string | null }[] = [];
    const client = track(
      new LocalAiClient({ binary: "local-ai", spawn: child.spawn, onExit: (i) => exits.push(i) }),
    );
    const started = client.start().catch((e: { code?: string }) => e.code);
    await client.shutdown();
    expect(exits).toEqual([expect.objectContaining({ expected: true, signal: "SIGKILL" })]);
    expect(client.pid).toBeUndefined();
    expect(await started).toBe("client_closed");
  });
});

describe("stopping a client whose previous core is still stopping", () => {
  test("shutdown() resolves once that earlier core has exited too", async () => {
    // A core found mute is let finish its stop; start() meanwhile launches the next. shutdown()
    // stopped only the newest and resolved while the earlier one ran on (a host may then remove
    // the data folder under it, or start another client on it).
    const children: FakeChild[] = [];
    const spawn = () => {
      // Each answers shutdown; the first, found mute, takes 1.5 s to exit after end of input.
      const child = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: {} }));
      child.eofExitDelayMs = children.length === 0 ? 1500 : 0;
      children.push(child);
      return child;
    };
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn }));
    children[0]?.mute();
    expect(await waitFor(() => children[0]?.stdinEnded === true, { timeoutMs: 5000 })).toBe(true);
    await client.start();
    expect(children).toHaveLength(2);
    await client.shutdown();
    expect(children.map((c) => c.exited)).toEqual([true, true]);
  }, 15_000);
});

describe("stopGraceMs Infinity", () => {
  test("never kills a core still stopping, as the longest wait a timer holds", async () => {
    // Taken for the 3 s default, it had a core that had not answered shutdown SIGKILLed 8 s into
    // its stop, though the host said its llama-server may take as long as it takes.
    const child = new FakeChild();
    child.exitOnEof = false;
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        stopGraceMs: Number.POSITIVE_INFINITY,
      }),
    );
    jest.useFakeTimers();
    try {
      void client.close({ timeoutMs: 0 });
      // An hour, a minute at a time, each step's follow-ups (a timed-out request, then the wait
      // for the exit) let run between.
      for (let minute = 0; minute < 60; minute++) {
        jest.advanceTimersByTime(60_000);
        for (let turn = 0; turn < 10; turn++) await Promise.resolve();
      }
    } finally {
      jest.useRealTimers();
    }
    expect(child.stdinEnded).toBe(false);
    expect(child.signals).toEqual([]);
  });
});

describe("a core that SIGKILL does not end", () => {
  // A process in uninterruptible sleep (its data folder on a NAS gone away, a hung driver) takes
  // no signal until its I/O returns, if ever: close() waited for its exit for good, and an app
  // quitting with `await client.close()` in before-quit never quit.
  for (const when of ["ready", "starting"] as const) {
    test(`close() of a core ${when} still resolves, after a bounded wait, and says so`, async () => {
      const child = new FakeChild();
      child.exitOnEof = false;
      child.kill = (signal = "SIGTERM") => {
        child.signals.push(signal);
        return true;
      };
      const warnings: string[] = [];
      const client = track(
        new LocalAiClient({
          binary: "local-ai",
          spawn: child.spawn,
          logger: { warn: (m) => warnings.push(m) },
        }),
      );
      if (when === "ready") await client.start();
      else {
        child.reading = false;
        client.start().catch(() => {});
      }
      let closed = false;
      jest.useFakeTimers();
      try {
        void client.close({ timeoutMs: 0 }).then(() => (closed = true));
        // A minute, a second at a time, each step's follow-ups let run between.
        for (let second = 0; second < 60 && !closed; second++) {
          jest.advanceTimersByTime(1000);
          for (let turn = 0; turn < 10; turn++) await Promise.resolve();
        }
      } finally {
        jest.useRealTimers();
      }
      expect(child.signals).toContain("SIGKILL");
      expect(closed).toBe(true);
      expect(warnings.filter((w) => w.includes("SIGKILL"))).toHaveLength(1);
    });
  }

  test("the restart after a hung core it did not end fails, rather than waiting for good", async () => {
    // The restart waited for that core's exit: start() (joining it) and the calls held for it
    // never settled. Nor is a second core started beside it, on the same data folder.
    const children: FakeChild[] = [];
    const spawn = () => {
      const child = new FakeChild();
      child.exitOnEof = false;
      child.kill = (signal = "SIGTERM") => {
        child.signals.push(signal);
        return true;
      };
      children.push(child);
      return child;
    };
    const failed: string[] = [];
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        requestTimeoutMs: 1000,
        stopGraceMs: 0,
        restart: { maxRestarts: 2, initialDelayMs: 10 },
        onFailed: (err) => failed.push(err.message),
      }),
    );
    children[0]!.reading = false;
    const outcomes: string[] = [];
    const note = (what: string, p: Promise<unknown>) =>
      p.then(
        () => outcomes.push(`${what} ok`),
        (err: { code?: string }) => outcomes.push(`${what} ${err.code}`),
      );
    jest.useFakeTimers();
    try {
      // Over the pipe's 16 KiB: the write is left queued, and the core is found hung 1 s later.
      note("big", client.request("echo", { text: "x".repeat(64 * 1024) }, { timeoutMs: 0 }));
      for (let second = 0; second < 60 && outcomes.length < 4; second++) {
        jest.advanceTimersByTime(1000);
        for (let turn = 0; turn < 20; turn++) await Promise.resolve();
        if (second === 2) {
          note("start", client.start());
          note("held", client.ping({ timeoutMs: 0 }));
          note("chat", client.chat({}).result);
        }
      }
    } finally {
      jest.useRealTimers();
    }
    expect(children).toHaveLength(1);
    expect(outcomes.sort()).toEqual([
      "big core_exited",
      "chat core_exited",
      "held core_exited",
      "start core_exited",
    ]);
    expect(failed).toHaveLength(1);
    expect(failed[0]).toContain("still runs");
  });
});
