import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isAlive } from "../../src/runtime/proc-info.ts";
import { spawnCore } from "../fixtures/core-process.ts";
import { killQuietly } from "../fixtures/kill-quietly.ts";
import { waitUntil, writeStack } from "../fixtures/stack.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The compiled core starts its MCP servers under the guard too (docs/agent.md, "MCP process
// lifetime"): its SIGKILL takes them down without waiting for the next core's reaper.

describe.skipIf(process.platform === "win32")("the compiled core's MCP servers", () => {
  test("a SIGKILL of the core takes a server that ignores stdin's end and SIGTERM, and its own child, within 5 s", async () => {
    await using dir = tmpdir();
    const stack = writeStack(dir.path, {
      script: [{ tool_calls: [{ name: "t__echo", arguments: '{"text":"x"}' }] }, { content: "done" }],
    });
    const grandchildFile = join(dir.path, "grandchild.pid");
    const config = join(dir.path, "config.yaml");
    writeFileSync(
      config,
      readFileSync(config, "utf8").replace(
        "env: { MCP_TEST_LOG:",
        `env: { MCP_TEST_MODE: stubborn, MCP_TEST_GRANDCHILD: ${JSON.stringify(grandchildFile)}, MCP_TEST_LOG:`,
      ),
    );
    const core = spawnCore({ cwd: dir.path, env: stack.env });
    const turn = await core.request({ id: "c", method: "chat", params: { input: "go" } }, 20_000);
    expect(turn).toMatchObject({ type: "result", result: { response: "done" } });
    const [server] = stack.mcpPids();
    const grandchild = existsSync(grandchildFile) ? Number(readFileSync(grandchildFile, "utf8").trim()) : 0;
    try {
      expect([server, grandchild].every((p) => !!p && isAlive(p))).toBe(true);
      core.proc.kill("SIGKILL");
      await core.proc.exited;
      const started = Date.now();
      expect(await waitUntil(() => !isAlive(server as number) && !isAlive(grandchild), 5000)).toBe(true);
      expect(Date.now() - started).toBeLessThan(5000);
    } finally {
      killQuietly(server, grandchild, ...stack.recordedServers());
    }
  }, 40_000);
});
