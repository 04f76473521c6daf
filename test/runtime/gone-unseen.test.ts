import { describe, expect, test } from "bun:test";
import { goneUnseen } from "../../src/runtime/gone-unseen.ts";
import { childRunning, exiting } from "../../src/runtime/proc-info.ts";
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

  test("on its way out: PF_EXITING in stat's flags, or SIGKILL among its pending signals", () => {
    // stat's fields after comm (index 0 is field 3, the state): flags is field 9, the pending
    // signals field 31, as /proc prints them for a sleeping process.
    const fields = (flags: number, pending: number) => {
      const f = Array.from({ length: 50 }, () => "0");
      f[0] = "S";
      f[6] = String(flags);
      f[28] = String(pending);
      return f;
    };
    expect(exiting(fields(0x400040, 0))).toBe(false);
    expect(exiting(fields(0x400044, 0))).toBe(true);
    expect(exiting(fields(0x400040, 0x100))).toBe(true);
    // SIGTERM (15: bit 14) and SIGUSR1 (10: bit 9) are not a kill.
    expect(exiting(fields(0x400040, 0x4200))).toBe(false);
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
