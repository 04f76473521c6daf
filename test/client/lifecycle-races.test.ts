import { afterEach, describe, expect, test } from "bun:test";
import { LocalAiClient, type LocalAiClientOptions } from "../../src/client/index.ts";
import { waitFor } from "../fixtures/wait.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

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
