import { describe, expect, test } from "bun:test";
import { ToolCallAssembler } from "../../src/llama/tool-call-deltas.ts";

// Streamed tool calls arrive in fragments by index (transcripts 14, 16).

describe("ToolCallAssembler", () => {
  test("joins fragments by index, keeping id and name from the first", () => {
    const a = new ToolCallAssembler();
    a.push({ index: 1, id: "B", type: "function", function: { name: "fs__write", arguments: '{"p"' } });
    a.push({ index: 0, id: "A", type: "function", function: { name: "fs__read", arguments: "{" } });
    a.push({ index: 0, function: { arguments: '"x":1}' } });
    a.push({ index: 1, function: { arguments: ":2}" } });
    expect(a.calls()).toEqual([
      { id: "A", type: "function", function: { name: "fs__read", arguments: '{"x":1}' } },
      { id: "B", type: "function", function: { name: "fs__write", arguments: '{"p":2}' } },
    ]);
  });
});
