import { describe, expect, test } from "bun:test";
import type { AgentTool } from "../../../src/agent/tool-registry.ts";
import { heaviest, toolsOverflow } from "../../../src/agent/turn/tools-cost.ts";

const tool = (server: string, description = "") =>
  ({ server, fn: `${server}__t`, description }) as unknown as AgentTool;
const sent = (tools: AgentTool[]) =>
  tools.map((t) => ({ type: "function", function: { name: t.fn, description: t.description } }));

describe("the tools' share of a prompt that does not fit", () => {
  const tools = [tool("small"), tool("big", "d".repeat(4000)), tool("big", "d".repeat(4000))];

  test("the rest fits: the tools take the prompt less the rest, shared by the size of each server's definitions", () => {
    const cost = toolsOverflow(sent(tools), tools, 2500, 100, 2048);
    expect(cost?.tokens).toBe(2400);
    expect(cost?.count).toBe(3);
    expect(cost?.servers.map((s) => [s.server, s.count])).toEqual([
      ["big", 2],
      ["small", 1],
    ]);
    const shares = cost?.servers.map((s) => s.tokens) ?? [];
    expect(Math.abs(shares.reduce((a, b) => a + b, 0) - 2400)).toBeLessThanOrEqual(1);
    expect(heaviest(cost as NonNullable<typeof cost>)).toMatch(
      /^'big' 2 tools, about \d+ tokens; 'small' 1 tools/,
    );
  });

  test("the rest does not fit either, no tools, or no count: not the tools' doing", () => {
    expect(toolsOverflow(sent(tools), tools, 5000, 3000, 2048)).toBeUndefined();
    expect(toolsOverflow([], [], 2500, 100, 2048)).toBeUndefined();
    expect(toolsOverflow(sent(tools), tools, undefined, 100, 2048)).toBeUndefined();
  });
});
