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

describe("a stderr line of the core over 64 KiB", () => {
  // It was dropped whole: the line that may say why the core crashed never reached the host.
  test("reaches onStderr and the exit's tail as its head, saying what was cut", async () => {
    const child = new FakeChild();
    const lines: string[] = [];
    const exits: ExitInfo[] = [];
    track(
      await LocalAiClient.start({
        binary: "local-ai",
        spawn: child.spawn,
        onStderr: (l) => lines.push(l),
        onExit: (i) => exits.push(i),
      }),
    );
    const long = `panic: ${"x".repeat(100_000)}`;
    child.stderr.write(`${long}\nafter\n`);
    child.stdout.end();
    child.stderr.end();
    child.exited = true;
    child.emit("exit", 1, null);
    await Promise.all([once(child.stdout, "close"), once(child.stderr, "close")]);
    await new Promise((r) => setImmediate(r));
    expect(lines).toHaveLength(2);
    expect(lines[0]?.startsWith("panic: xxx")).toBe(true);
    expect(lines[0]?.length).toBeLessThan(1000);
    expect(lines[0]).toContain(`${Buffer.byteLength(long)} bytes`);
    expect(lines[1]).toBe("after");
    expect(exits[0]?.stderrTail).toEqual(lines);
  });
});
