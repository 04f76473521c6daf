import { afterEach, describe, expect, test } from "bun:test";
import { once } from "node:events";
import type { ExitInfo } from "../../src/client/host-types.ts";
import { LocalAiClient } from "../../src/client/index.ts";
import { FakeChild } from "./fake-child.ts";
import { killFakes, track } from "./fake-core-fixture.ts";

afterEach(killFakes);

describe("a core's last stderr lines", () => {
  // A process's pipes close in no set order: its stderr may still hold its last lines (why it
  // exited, a shell's "Syntax error") after stdout closed and the exit was seen.
  test("written after stdout closed and the exit was seen, are in the exit's stderr tail", async () => {
    const child = new FakeChild();
    const exits: ExitInfo[] = [];
    track(
      await LocalAiClient.start({ binary: "local-ai", spawn: child.spawn, onExit: (i) => exits.push(i) }),
    );
    child.stdout.end();
    await once(child.stdout, "close");
    child.exited = true;
    child.emit("exit", 3, null);
    child.stderr.write("fatal: the data folder is not writable\n");
    child.stderr.end();
    await once(child.stderr, "close");
    await new Promise((r) => setImmediate(r));
    expect(exits).toHaveLength(1);
    expect(exits[0]?.code).toBe(3);
    expect(exits[0]?.stderrTail).toEqual(["fatal: the data folder is not writable"]);
  });
});
