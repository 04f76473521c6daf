import { describe, expect, test } from "bun:test";
import { goneUnseen } from "../../src/runtime/gone-unseen.ts";
import { childRunning, sigkillPending } from "../../src/runtime/proc-info.ts";
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

  test("gone from the moment kill() returns, before it is a zombie (its memory still being freed)", async () => {
    // The state alone said "running" here in 19 of 20 tries: a killed process of ~200 MB takes
    // milliseconds to become a zombie, and its port may take connections meanwhile.
    for (let i = 0; i < 5; i++) {
      const child = Bun.spawn([
        process.execPath,
        "-e",
        "new Uint8Array(2e8).fill(1); setInterval(() => {}, 1000)",
      ]);
      try {
        await Bun.sleep(200);
        expect(childRunning(child.pid)).toBe(true);
        process.kill(child.pid, "SIGKILL");
        expect(childRunning(child.pid)).toBe(false);
      } finally {
        child.kill();
        await child.exited;
      }
    }
  });

  test("a SIGKILL pending, the thread's own or shared, is read from status's masks", () => {
    const status = (own: string, shared: string) =>
      `State:\tS (sleeping)\nSigPnd:\t${own}\nShdPnd:\t${shared}\n`;
    expect(sigkillPending(status("0000000000000000", "0000000000000000"))).toBe(false);
    expect(sigkillPending(status("0000000000000100", "0000000000000000"))).toBe(true);
    expect(sigkillPending(status("0000000000000000", "0000000000004100"))).toBe(true);
    // SIGTERM (15: bit 14) and SIGUSR1 (10: bit 9) are not a kill.
    expect(sigkillPending(status("0000000000004200", "0000000000000000"))).toBe(false);
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
