import { afterEach, describe, expect, test } from "bun:test";
import { onHostExit } from "../../src/client/host-exit.ts";
import { LocalAiClient } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

// The host's process exiting while its core runs (fake-child.ts, ignoring end of input).
afterEach(killFakes);

describe("the host process exiting", () => {
  test("kills a core still running, through one exit hook, removed once it ended", async () => {
    const before = process.listeners("exit");
    const child = new FakeChild();
    child.exitOnEof = false;
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn }));
    // The one shared listener: added now, or already there for a client another file left running.
    expect(process.listeners("exit")).toContain(onHostExit);
    expect(process.listeners("exit").length - before.length).toBeLessThanOrEqual(1);
    // What Node does on process.exit(): call the exit listeners.
    onHostExit();
    expect(child.signals).toEqual(["SIGKILL"]);
    await client.close();
    expect(process.listeners("exit")).toEqual(before);
  });

  // Node warns of a leak past ten listeners of one event: a host holding many clients must not.
  test("one exit hook for every client: twelve cores, one listener, each core killed", async () => {
    const before = process.listeners("exit");
    const children = Array.from({ length: 12 }, () => {
      const child = new FakeChild();
      child.exitOnEof = false;
      return child;
    });
    const clients = await Promise.all(
      children.map(async (child) =>
        track(await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn })),
      ),
    );
    expect(process.listeners("exit")).toContain(onHostExit);
    expect(process.listeners("exit").length - before.length).toBeLessThanOrEqual(1);
    onHostExit();
    for (const child of children) expect(child.signals).toEqual(["SIGKILL"]);
    await Promise.all(clients.map((c) => c.close()));
    expect(process.listeners("exit")).toEqual(before);
  });
});

describe("a core still stopping when the next one starts", () => {
  test("is let end before the next is spawned, and the host's exit meanwhile kills it", async () => {
    const before = process.listeners("exit");
    const children: FakeChild[] = [];
    const spawn = () => {
      const child = new FakeChild();
      child.exitOnEof = false;
      children.push(child);
      return child;
    };
    // A long stop grace: the mute core stays stopping for the whole test.
    const client = track(await LocalAiClient.start({ binary: "local-ai", spawn, stopGraceMs: 60_000 }));
    children[0]?.mute();
    expect(await waitFor(() => children[0]?.stdinEnded === true, { timeoutMs: 5000 })).toBe(true);
    expect(client.running).toBe(false);
    const starting = client.start();
    // Never beside it: two cores would share the data folder.
    await Bun.sleep(50);
    expect(children).toHaveLength(1);
    // The host exits meanwhile: the core still stopping is killed, not left to outlive it.
    onHostExit();
    expect(children[0]?.signals).toEqual(["SIGKILL"]);
    await starting;
    expect(children).toHaveLength(2);
    expect(client.running).toBe(true);
    onHostExit();
    expect(children[1]?.signals).toEqual(["SIGKILL"]);
    expect(await waitFor(() => process.listeners("exit").length === before.length)).toBe(true);
    expect(process.listeners("exit")).toEqual(before);
  });
});

describe("a core whose initialize fails", () => {
  test("is killed by the client, and onExit calls that exit expected", async () => {
    const exits: { expected: boolean; signal: string | null }[] = [];
    const child = new FakeChild();
    child.initError = "invalid_request";
    const err = await LocalAiClient.start({
      binary: "local-ai",
      spawn: child.spawn,
      onExit: (i) => exits.push(i),
    })
      .then(() => undefined)
      .catch((e: Error) => e);
    expect((err as { code?: string } | undefined)?.code).toBe("invalid_request");
    while (exits.length === 0) await Bun.sleep(5);
    expect(exits).toEqual([expect.objectContaining({ expected: true, signal: "SIGKILL" })]);
  });
});
