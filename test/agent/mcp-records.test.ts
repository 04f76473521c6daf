import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { spawnMcpServer } from "../../src/agent/mcp/child.ts";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { McpServerSchema } from "../../src/config/schema.ts";
import { judgeLeftover } from "../../src/runtime/leftover-verdict.ts";
import type { PidRecord } from "../../src/runtime/pid-file.ts";
import { type ProcIdentity, procIdentity } from "../../src/runtime/proc-info.ts";
import { sameFile } from "../../src/util/same-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";
import { MCP_SERVER } from "./harness.ts";

// MCP servers are recorded like llama-server (pid, start time, what was spawned), so the next
// core can reap one a core killed outright left running (test/e2e/reaping.test.ts).
const records = (dataDir: string) => {
  const dir = join(dataDir, "run", "mcp");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith(".json"))
    .map((n) => JSON.parse(readFileSync(join(dir, n), "utf8")) as PidRecord);
};

describe("the MCP pool records its servers' processes", () => {
  test("written at spawn with what was spawned, removed once the server is stopped", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const pids = join(dir.path, "pids");
    const pool = new McpPool(
      [
        McpServerSchema.parse({
          name: "t",
          command: process.execPath,
          args: [MCP_SERVER],
          env: { MCP_TEST_PIDS: pids },
        }),
      ],
      Date.now,
      data,
    );
    await pool.tools("t", new AbortController().signal);
    const [pid] = readFileSync(pids, "utf8").split("\n").filter(Boolean).map(Number);
    expect(records(data)).toEqual([
      expect.objectContaining({ kind: "mcp", name: "t", pid, binary: process.execPath, argv: [MCP_SERVER] }),
    ]);
    expect(records(data)[0]?.owner.pid).toBe(process.pid);
    await pool.close();
    expect(records(data)).toEqual([]);
  }, 20_000);

  test("a server that fails to start leaves no record", async () => {
    await using dir = tmpdir();
    const data = join(dir.path, "data");
    const pool = new McpPool(
      [
        McpServerSchema.parse({
          name: "t",
          command: process.execPath,
          args: [MCP_SERVER],
          env: { MCP_TEST_MODE: "hang-init" },
          startup_timeout_s: 0.5,
        }),
      ],
      Date.now,
      data,
    );
    await expect(pool.tools("t", new AbortController().signal)).rejects.toThrow("startup_timeout_s");
    expect(records(data)).toEqual([]);
    await pool.close();
  }, 20_000);
});

describe.skipIf(process.platform === "win32")("a guarded server's record as the reaper judges it", () => {
  test("a server configured by a bare name with no arguments is recognised as the one recorded", async () => {
    // The guard runs the absolute path it found (`cat` -> /usr/bin/cat), so argv[0] is that path,
    // not the name the record and the config hold; with no arguments to match either, the next
    // core judged the leftover "unexplained" and left it to run.
    const child = spawnMcpServer({
      command: "cat",
      args: [],
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
    });
    try {
      // Judged once the guard's shell has exec'd it, as the next core judges it. Mid-exec, the
      // kernel shows an empty command line for a moment: not yet the server either.
      const shown = () => procIdentity(child.pid)?.argv?.[0];
      expect(await waitFor(() => !!shown() && shown() !== "/bin/sh")).toBe(true);
      const now = procIdentity(child.pid);
      const record = { start_time: (now as ProcIdentity).start_time, binary: "cat", argv: [] };
      expect(judgeLeftover(record, now as ProcIdentity, ["cat"], sameFile)).toEqual({ verdict: "ours" });
    } finally {
      child.kill();
      await child.exited;
    }
  });
});
