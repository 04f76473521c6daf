import { describe, expect, test } from "bun:test";
import { goneUnseen } from "../../src/runtime/gone-unseen.ts";
import { childRunning } from "../../src/runtime/proc-info.ts";
import { killUnseen } from "./helpers/kill-unseen.ts";

// The look before a lease (docs/supervisor.md, "A server that died a moment ago"): on Linux from
// /proc, with no round trip to the server (docs/performance.md "The first token, again").

const never = () => new AbortController().signal;

describe.skipIf(process.platform !== "linux")("childRunning and goneUnseen from /proc", () => {
  test("a running child is running; killed, its zombie is gone before its exit is reported", async () => {
    const child = Bun.spawn(["sleep", "30"]);
    try {
      expect(childRunning(child.pid)).toBe(true);
      // Port 1: nothing listens there, so an answer could only have come from /proc.
      expect(await goneUnseen(child.pid, 1, never())).toBe(false);
      killUnseen(child.pid);
      expect(child.exitCode).toBeNull();
      expect(childRunning(child.pid)).toBe(false);
      expect(await goneUnseen(child.pid, 1, never())).toBe(true);
    } finally {
      child.kill();
      await child.exited;
    }
  });

  test("a pid with no process at all is gone", () => {
    // Above the kernel's pid_max (at most 2^22): never a process.
    expect(childRunning(2 ** 22 + 7)).toBe(false);
  });
});

describe.skipIf(process.platform === "linux")("goneUnseen without /proc", () => {
  test("a port where nothing listens is gone; childRunning cannot tell", async () => {
    expect(childRunning(process.pid)).toBeUndefined();
    const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: () => {} } });
    const port = server.port;
    server.stop(true);
    expect(await goneUnseen(process.pid, port, never())).toBe(true);
  });
});
