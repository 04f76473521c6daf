import { expect, test } from "bun:test";
import { join } from "node:path";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { hostileServer } from "../fixtures/mcp-hostile.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const never = new AbortController().signal;

test("tools the SDK's schema would refuse cost their own places, not their server's other tools", async () => {
  using scratch = tmpdir();
  const pool = new McpPool([hostileServer("loose-list", join(scratch.path, "pids"), 30)]);
  try {
    // Read through the SDK's ListToolsResultSchema, any one of them failed the whole start.
    const { tools, dropped } = await pool.listing("h", never);
    expect(tools.map((t) => [t.name, t.description])).toEqual([
      ["echo", "e"],
      ["nodesc", ""],
    ]);
    expect(dropped).toContain("3 of the 5 tools it listed were left out");
    expect(dropped).toContain('1 with an input schema that is not an object\'s ("stringy")');
    expect((await pool.call("h", "echo", { x: 1 }, never)).text).toBe('echo {"x":1}');
  } finally {
    await pool.close();
  }
}, 60_000);
