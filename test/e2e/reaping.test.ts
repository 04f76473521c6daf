import { describe, expect, test } from "bun:test";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// SPEC §3: what a core killed outright leaves behind is stopped by the next core on the same
// data directory. (isAlive: an orphan killed here may linger as a zombie; that counts as gone.)

function killQuietly(pid: number | undefined): void {
  try {
    if (pid) process.kill(pid, "SIGKILL");
  } catch {
    // already gone
  }
}

describe.skipIf(process.platform === "win32")("leftovers of a core killed outright", () => {
  test("a core that gets one request and EOF at once still stops a leftover llama-server before it exits", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path);
    // The leftover ignores SIGTERM, so stopping it takes the reaper's grace period: a core
    // that exits as soon as its input ends would leave it running.
    const first = spawnCore({ cwd: dir.path, env: { ...stack.env, FAKE_LLAMA_IGNORE_SIGTERM: "1" } });
    expect((await first.request({ id: "w", method: "warmup" })).type).toBe("result");
    const [leftover] = stack.recordedServers();
    first.proc.kill("SIGKILL");
    await first.proc.exited;
    try {
      expect(isAlive(leftover as number)).toBe(true);
      await using second = spawnCore({ cwd: dir.path, env: stack.env });
      second.send({ id: 1, method: "ping" });
      second.closeStdin();
      expect(await second.exited(15_000)).toBe(0);
      expect(second.terminal(1)).toMatchObject({ type: "result" });
      expect(isAlive(leftover as number)).toBe(false);
    } finally {
      killQuietly(leftover);
    }
  }, 30_000);
});
