import { expect, test } from "bun:test";
import { join } from "node:path";
import { McpPool } from "../../src/agent/mcp/pool.ts";
import { MAX_DESCRIPTION_CHARS, vetTools } from "../../src/agent/mcp/tool-list.ts";
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

// The description goes to llama-server in every request's tools: half an emoji at the cut is a
// lone surrogate, which its JSON parser refuses, failing every chat that offers the tool.
test("a long tool description is cut between characters", () => {
  const description = `${"d".repeat(MAX_DESCRIPTION_CHARS - 1)}😀 and more`;
  const { tools } = vetTools([{ name: "wordy", description }]);
  expect(tools[0]?.description.length).toBeLessThanOrEqual(MAX_DESCRIPTION_CHARS);
  expect(tools[0]?.description.isWellFormed()).toBe(true);
});
