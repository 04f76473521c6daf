import { expect, test } from "bun:test";
import { ChatHarness } from "./harness.ts";

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
