import { expect, test } from "bun:test";
import { ChatHarness, MCP_SERVER } from "./harness.ts";

// docs/agent.md#mcp-servers: an agent's `server.tool` pattern that names no tool its server lists
// (a typo, a tool renamed) offered nothing, and said nothing: the model simply had no such tool.

test("a pattern naming a tool its server does not list costs a tools_unavailable warning naming it", async () => {
  await using h = new ChatHarness({
    agents: [{ name: "assistant", system_prompt: "You are a test.", tools: ["t.echo", "t.ecoh"] }],
  });
  h.llama.script({ content: "fine" });
  const { terminal } = await h.chat("c1", { input: "hi" });
  expect(terminal.type).toBe("result");
  const { warnings } = terminal.result as { warnings: { code: string; message: string }[] };
  expect(warnings).toHaveLength(1);
  expect(warnings[0]?.code).toBe("tools_unavailable");
  expect(warnings[0]?.message).toContain("'t.ecoh'");
  // The tool it does list is offered all the same.
  const tools = h.llama.requests[0]?.body.tools as { function: { name: string } }[];
  expect(tools.map((t) => t.function.name)).toEqual(["t__echo"]);
});

test("a server.* pattern and patterns that name listed tools cost no warning", async () => {
  await using h = new ChatHarness({
    agents: [{ name: "assistant", system_prompt: "You are a test.", tools: ["t.*", "t.echo"] }],
  });
  h.llama.script({ content: "fine" });
  const { terminal } = await h.chat("c1", { input: "hi" });
  expect((terminal.result as { warnings: unknown[] }).warnings).toEqual([]);
});

// A pattern naming a tool its server lists but that was left out as unfit to offer (its input
// schema a string's) was also told as "not among its tools": a typo to look for that is not one.
test("a pattern naming a listed tool left out as unfit is told once, as left out", async () => {
  const { join } = await import("node:path");
  const { hostileServer } = await import("../fixtures/mcp-hostile.ts");
  const { tmpdir } = await import("../fixtures/tmpdir.ts");
  using scratch = tmpdir();
  await using h = new ChatHarness({
    agents: [{ name: "assistant", system_prompt: "You are a test.", tools: ["h.echo", "h.stringy"] }],
    mcp_servers: [hostileServer("loose-list", join(scratch.path, "pids"), 30)],
  });
  h.llama.script({ content: "fine" });
  const { terminal } = await h.chat("c1", { input: "hi" });
  const { warnings } = terminal.result as { warnings: { code: string; message: string }[] };
  expect(warnings.map((w) => w.message)).toEqual([expect.stringContaining('"stringy"')]);
});

// A requires_approval entry can be checked only once its server lists its tools: a typo there
// (`write_ntoe`) guarded nothing, and the tool it meant ran unapproved without a word.
test("a requires_approval entry naming no tool its server lists costs a warning naming it; listed ones none", async () => {
  const server = (requires_approval: string[]) => ({
    name: "t",
    command: process.execPath,
    args: [MCP_SERVER],
    timeout_s: 20,
    requires_approval,
  });
  for (const [entries, warned] of [
    [["write_ntoe", "echo"], true],
    [["write_note", "*"], false],
  ] as const) {
    await using h = new ChatHarness({ mcp_servers: [server([...entries])] });
    h.llama.script({ content: "fine" });
    const { terminal } = await h.chat("c1", { input: "hi" });
    const { warnings } = terminal.result as { warnings: { code: string; message: string }[] };
    if (!warned) {
      expect(warnings).toEqual([]);
      continue;
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.code).toBe("tools_unavailable");
    expect(warnings[0]?.message).toContain("requires_approval");
    expect(warnings[0]?.message).toContain("'write_ntoe'");
    expect(warnings[0]?.message).not.toContain("'echo'");
  }
});
