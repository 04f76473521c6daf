import { expect, test } from "bun:test";
import { bunSpawner } from "../../src/runtime/spawn.ts";

test.skipIf(process.platform === "win32")(
  "a line to a child that closed its stdin fails quietly: no unhandled rejection (child mode's writes)",
  async () => {
    const stray: unknown[] = [];
    const onStray = (err: unknown) => stray.push(err);
    process.on("unhandledRejection", onStray);
    try {
      // A child that closes its stdin at once and lives on, as a llama-server gone odd might.
      const child = bunSpawner({
        path: "/bin/sh",
        argv: ["-c", "exec 0<&-; sleep 3"],
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
        stdinPipe: true,
      });
      await Bun.sleep(200);
      // More than a pipe takes at once: the write comes back as a promise, which fails with EPIPE.
      for (let i = 0; i < 4; i++) child.writeLine("x".repeat(256 * 1024));
      await Bun.sleep(300);
      child.kill();
      await child.exited;
      expect(stray).toEqual([]);
    } finally {
      process.off("unhandledRejection", onStray);
    }
  },
);
