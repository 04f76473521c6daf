import { afterEach, describe, expect, jest, test } from "bun:test";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

// A core SIGKILL does not end at once (fake-child.ts, its kill() only recorded), as
// CoreProcess.gone() bounds the wait for it (docs/bootstrap.md "Stopping").
afterEach(killFakes);

/** A fake core whose SIGKILL is recorded, not obeyed: the test says when it exits. */
function stubborn(): FakeChild {
  const child = new FakeChild();
  child.exitOnEof = false;
  child.kill = (signal = "SIGTERM") => {
    child.signals.push(signal);
    return true;
  };
  return child;
}

/**
 * A client whose first core is stubborn(), the ones after it well-behaved, with one restart: what
 * it warned, reported failed and exited.
 */
async function startStubbornFirst() {
  const children: FakeChild[] = [];
  const spawn = () => {
    const child = children.length === 0 ? stubborn() : new FakeChild();
    children.push(child);
    return child;
  };
  const warnings: string[] = [];
  const failed: string[] = [];
  const exits: unknown[] = [];
  const client = track(
    await LocalAiClient.start({
      binary: "local-ai",
      spawn,
      stopGraceMs: 0,
      restart: { maxRestarts: 1, initialDelayMs: 10 },
      logger: { warn: (m) => warnings.push(m) },
      onFailed: (err) => failed.push(err.message),
      onExit: (info) => exits.push(info),
    }),
  );
  return { client, children, first: children[0]!, warnings, failed, exits };
}

/** Advances fake time by `ms`, a step at a time, letting each step's follow-ups run. */
async function advance(ms: number, step = 100): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    jest.advanceTimersByTime(step);
    for (let turn = 0; turn < 20; turn++) await new Promise((r) => process.nextTick(r));
  }
}

describe("a core that exits late after its SIGKILL", () => {
  test("one whose exit came before the 5 s but its pipes after is not taken for still running", async () => {
    // A killed core's llama-server (or a wrapper's child) that inherited its stdout holds the pipe
    // a moment past the exit: the exit event came 4.5 s after the SIGKILL, its pipes 1 s later.
    // The 5 s wait fired in between: it warned the core still ran, and the restart was refused
    // with core_exited ("still runs after its SIGKILL"), though the core was dead.
    const { client, children, first, warnings, failed } = await startStubbornFirst();
    jest.useFakeTimers();
    try {
      first.mute();
      // Found mute, stopped, then SIGKILLed after its stop grace.
      for (let s = 0; s < 30 && !first.signals.includes("SIGKILL"); s++) await advance(1000);
      expect(first.signals).toContain("SIGKILL");
      await advance(4500);
      first.emit("exit", null, "SIGKILL");
      await advance(700);
      first.stderr.end();
      await advance(2000);
    } finally {
      jest.useRealTimers();
    }
    await client.start();
    expect(warnings.filter((w) => w.includes("still runs"))).toEqual([]);
    expect(failed).toEqual([]);
    expect(children).toHaveLength(2);
  });
});

describe("a core that outlives its SIGKILL", () => {
  test("once given up on, it no longer holds the host's process open", async () => {
    // close() resolved 5 s after the SIGKILL, but the child and its pipes, still referenced, kept
    // a Node host's event loop alive: a CLI host whose work was done never exited, until the core
    // came out of its uninterruptible sleep, if ever.
    const child = stubborn();
    const unrefs: string[] = [];
    Object.assign(child, { unref: () => unrefs.push("child") });
    for (const name of ["stdin", "stdout", "stderr"] as const)
      Object.assign(child[name], { unref: () => unrefs.push(name) });
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    let closed = false;
    jest.useFakeTimers();
    try {
      void client.close({ timeoutMs: 0 }).then(() => (closed = true));
      for (let s = 0; s < 60 && !closed; s++) await advance(1000, 1000);
    } finally {
      jest.useRealTimers();
    }
    expect(closed).toBe(true);
    expect(unrefs.sort()).toEqual(["child", "stderr", "stdin", "stdout"]);
  });
});

describe("after a restart refused for a core that outlived its SIGKILL", () => {
  test("the client is not dead for good: start() once that core has exited launches the next", async () => {
    const { client, children, first, failed, exits } = await startStubbornFirst();
    jest.useFakeTimers();
    try {
      first.mute();
      for (let s = 0; s < 40 && failed.length === 0; s++) await advance(1000);
    } finally {
      jest.useRealTimers();
    }
    expect(failed).toEqual([expect.stringContaining("still runs after its SIGKILL")]);
    expect((await client.ping().catch((e: { code?: string }) => e)).code).toBe("core_exited");
    // Out of its uninterruptible sleep at last: the SIGKILL takes.
    first.exit(null, "SIGKILL");
    expect(await waitFor(() => exits.length === 1, { intervalMs: 2 })).toBe(true);
    await client.start();
    expect(children).toHaveLength(2);
    expect(client.running).toBe(true);
  });
});

describe("a core stopped as broken that exits at once", () => {
  test("leaves no kill timer behind it, however long its stop grace", async () => {
    // The kill due after its stop grace stayed scheduled after its exit, holding the old core's
    // process object (its stderr tail, its pipes) for the grace: with stopGraceMs Infinity,
    // 24.8 days, one more for each restart of a core found mute.
    const children: FakeChild[] = [];
    const spawn = () => {
      const child = new FakeChild();
      children.push(child);
      return child;
    };
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        stopGraceMs: Number.POSITIVE_INFINITY,
        restart: { initialDelayMs: 10 },
      }),
    );
    jest.useFakeTimers();
    try {
      children[0]!.mute();
      for (let s = 0; s < 20 && children.length < 2; s++) {
        await advance(100, 10);
        // fake-child.ts emits its exit on setImmediate, which fake time does not run.
        await new Promise((r) => setImmediate(r));
      }
      await advance(100, 10);
      expect(children).toHaveLength(2);
      expect(client.running).toBe(true);
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });
});
