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

describe("ToolCallAssembler ids", () => {
  test("each call of a step has its own id: a usable one kept, the rest call_<n> not taken", () => {
    const a = new ToolCallAssembler();
    const ids = ["call_0", "call_0", undefined, "x".repeat(65), "two words", "ok"];
    ids.forEach((id, index) => {
      a.push({ index, ...(id === undefined ? {} : { id }), function: { name: "t", arguments: "{}" } });
    });
    expect(a.calls().map((c) => c.id)).toEqual(["call_0", "call_1", "call_2", "call_3", "call_4", "ok"]);
  });
});
