import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// docs/supervisor.md: what a core killed outright leaves behind is stopped by the next core on the
// same data directory. (isAlive: an orphan killed here may linger as a zombie; that counts as
// gone.)

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
    // A build without child mode: one that speaks it exits with its core, leaving nothing to reap.
    const stack = writeStack(dir.path, { knobs: { FAKE_LLAMA_NO_CHILD_MODE: "1" } });
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

  test("an MCP server that ignores stdin's end and SIGTERM is stopped by the next core within 10 s", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ tool_calls: [{ name: "t__echo", arguments: '{"text":"x"}' }] }, { content: "done" }],
    });
    const config = join(dir.path, "config.yaml");
    writeFileSync(
      config,
      readFileSync(config, "utf8").replace(
        "env: { MCP_TEST_LOG:",
        "env: { MCP_TEST_MODE: stubborn, MCP_TEST_LOG:",
      ),
    );
    const first = spawnCore({ cwd: dir.path, env: stack.env });
    const turn = await first.request({ id: "c", method: "chat", params: { input: "go" } }, 20_000);
    expect(turn).toMatchObject({ type: "result", result: { response: "done" } });
    const [server] = stack.mcpPids();
    first.proc.kill("SIGKILL");
    await first.proc.exited;
    try {
      await Bun.sleep(500);
      expect(isAlive(server as number)).toBe(true); // it outlived its core
      await using second = spawnCore({ cwd: dir.path, env: stack.env });
      expect(await waitUntil(() => !isAlive(server as number), 10_000)).toBe(true);
      second.closeStdin();
      expect(await second.exited(15_000)).toBe(0);
    } finally {
      killQuietly(server);
      for (const pid of stack.recordedServers()) killQuietly(pid);
    }
  }, 40_000);
});
