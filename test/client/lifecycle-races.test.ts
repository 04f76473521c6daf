import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient, type LocalAiClientOptions, type LocalAiError } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, rejection, track } from "./fake-core-fixture.ts";

// A host calling back into the client while the core's lifecycle is between states
// (fake-child.ts stands in for the core, one child per spawn).
afterEach(killFakes);

/** A spawn that hands out a fresh echoing child each time, and the children it made. */
function echoChildren(): { children: FakeChild[]; spawn: LocalAiClientOptions["spawn"] } {
  const children: FakeChild[] = [];
  const spawn = () => {
    const child = new FakeChild((req, c) => c.send({ id: req.id, type: "result", result: req.params }));
    children.push(child);
    return child;
  };
  return { children, spawn };
}

describe("start() from a host callback", () => {
  test("start() in onExit of a crash joins the restart, not the old start that already resolved", async () => {
    const { children, spawn } = echoChildren();
    let joined: Promise<number> | undefined;
    const client: LocalAiClient = track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn,
        restart: { initialDelayMs: 100 },
        // A host restarting its core by hand: the client restarts it already.
        onExit: () => {
          joined ??= client.start().then(() => children.length);
        },
      }),
    );
    children[0]?.exit(1, null);
    expect(await waitFor(() => joined !== undefined, { timeoutMs: 5000 })).toBe(true);
    // It resolved at once with the first start's promise, while no core ran.
    expect(await joined).toBe(2);
    expect(client.running).toBe(true);
    expect(await client.request("echo", { after: "restart" })).toEqual({ after: "restart" });
    expect(children).toHaveLength(2);
  });
});

describe("start() while a core that fell mute stops", () => {
  test("joins the restart that follows its exit, rather than resolving at once", async () => {
    const { children, spawn } = echoChildren();
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn, restart: { initialDelayMs: 50 } }),
    );
    // It stops 800 ms after end of input, as a core stopping llama-server does.
    if (children[0]) children[0].eofExitDelayMs = 800;
    children[0]?.mute();
    expect(await waitFor(() => children[0]?.stdinEnded === true, { timeoutMs: 5000 })).toBe(true);
    // It resolved with the first start's promise while the mute core still stopped.
    await client.start();
    expect(children).toHaveLength(2);
    expect(client.running).toBe(true);
  });
});

describe("the exit of a core whose initialize failed", () => {
  test("does not restart a first start() that failed, even with restart on", async () => {
    const children: FakeChild[] = [];
    const restarts: unknown[] = [];
    const client = track(
      new LocalAiClient({
        binary: "local-ai",
        restart: { initialDelayMs: 20 },
        onRestart: (r) => restarts.push(r),
        spawn: () => {
          const child = new FakeChild();
          child.initError = "invalid_request";
          children.push(child);
          return child;
        },
      }),
    );
    expect((await rejection(client.start())).code).toBe("invalid_request");
    // The killed core's exit came after the start had failed, and was taken for a crash.
    await Bun.sleep(300);
    expect(restarts).toEqual([]);
    expect(children).toHaveLength(1);
    // What the host is told is why the start failed, not that the client killed it.
    const err = await rejection(client.ping());
    expect(err.message).toContain("initialize refused");
  });

  test("during a restart's back-off does not begin a second restart loop", async () => {
    const children: FakeChild[] = [];
    const restarts: { attempt: number }[] = [];
    const client = track(
      await LocalAiClient.start({
        binary: "local-ai",
        restart: { maxRestarts: 3, initialDelayMs: 50 },
        onRestart: (r) => restarts.push(r),
        spawn: () => {
          const child = new FakeChild();
          // Every relaunch is refused at initialize.
          if (children.length > 0) child.initError = "invalid_request";
          children.push(child);
          return child;
        },
      }),
    );
    children[0]?.exit(1, null);
    expect(await waitFor(() => client.running === false && restarts.length === 3, { timeoutMs: 5000 })).toBe(
      true,
    );
    await Bun.sleep(800);
    expect(restarts.map((r) => r.attempt)).toEqual([1, 2, 3]);
    expect(children).toHaveLength(4);
  });
});

describe("a core that exits as it answers initialize", () => {
  test("fails the start, rather than leaving the client running on a dead core", async () => {
    // Its exit is seen first and its answer comes with its stdout's end: the exit was handled
    // (in start-up: the launch's business) before the launch went on to call the core ready.
    class AnswerThenExit extends FakeChild {
      override send(msg: Record<string, unknown>): void {
        if (this.exited) return;
        this.exited = true;
        this.emit("exit", 3, null);
        super.send(msg);
        this.stdout.end();
        this.stderr.end();
      }
    }
    const child = new AnswerThenExit();
    const client = track(new LocalAiClient({ binary: "local-ai", spawn: child.spawn }));
    const err = await rejection(client.start());
    expect(err.code).toBe("core_exited");
    expect(err.data?.exit_code).toBe(3);
    expect(client.running).toBe(false);
  });
});

describe("calls refused once the core exited for good", () => {
  // They carried the last exit's data object itself: a host changing one error's changed them all.
  test("each carry their own copy of the exit's data", async () => {
    const { children, spawn } = echoChildren();
    const exits: unknown[] = [];
    const client = track(
      await LocalAiClient.start({ binary: "local-ai", spawn, onExit: (i) => exits.push(i) }),
    );
    children[0]?.stderr.write("fatal: out of memory\n");
    children[0]?.exit(1, null);
    expect(await waitFor(() => exits.length === 1, { timeoutMs: 5000 })).toBe(true);
    const a = (await client.ping().catch((e) => e)) as LocalAiError<"core_exited">;
    const b = (await client.ping().catch((e) => e)) as LocalAiError<"core_exited">;
    expect(a.code).toBe("core_exited");
    a.data?.stderr_tail?.push("added by the host");
    expect(b.data?.stderr_tail).toEqual(["fatal: out of memory"]);
  });
});
