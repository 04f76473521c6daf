import { describe, expect, test } from "bun:test";
import { interpretStep } from "../../src/agent/tool-calls.ts";

const known = new Set(["fs__read", "fs__write"]);

describe("interpretStep", () => {
  test("plain text is final", () => {
    expect(interpretStep("Hello", [], known, 0)).toEqual({ kind: "final", text: "Hello" });
  });

  test("native calls are parsed; empty arguments mean {}", () => {
    const out = interpretStep(
      "",
      [{ id: "1", type: "function", function: { name: "fs__read", arguments: "" } }],
      known,
      0,
    );
    expect(out).toMatchObject({ kind: "calls", calls: [{ id: "1", name: "fs__read", args: {} }] });
  });

  test("native call with bad JSON or unknown name is malformed and says why", () => {
    const out = interpretStep(
      "",
      [
        { id: "1", type: "function", function: { name: "fs__read", arguments: '{"a":' } },
        { id: "2", type: "function", function: { name: "nope", arguments: "{}" } },
      ],
      known,
      0,
    );
    expect(out.kind).toBe("malformed");
    if (out.kind !== "malformed") return;
    expect(out.problems[0]).toContain("not valid JSON");
    expect(out.problems[1]).toContain("unknown tool 'nope'");
  });

  test("tagged text fallback with text around it", () => {
    const out = interpretStep(
      'Sure. <tool_call>{"name":"fs__read","arguments":{"path":"a"}}</tool_call>',
      [],
      known,
      3,
    );
    expect(out).toMatchObject({
      kind: "calls",
      text: "Sure.",
      calls: [{ id: "call_3_0", name: "fs__read", args: { path: "a" } }],
      toolCalls: [{ id: "call_3_0", function: { name: "fs__read", arguments: '{"path":"a"}' } }],
    });
  });

  test("an unclosed tag, string arguments and 'parameters' are accepted", () => {
    const out = interpretStep('<tool_call>{"name":"fs__write","parameters":"{\\"x\\":1}"}', [], known, 0);
    expect(out).toMatchObject({ kind: "calls", calls: [{ name: "fs__write", args: { x: 1 } }] });
  });

  test("a bare JSON object naming a known tool counts; other JSON is an answer", () => {
    expect(interpretStep('{"name":"fs__read","arguments":{}}', [], known, 0).kind).toBe("calls");
    expect(interpretStep('{"name":"Bob"}', [], known, 0).kind).toBe("final");
  });

  test("broken tagged JSON and arguments that are not an object are malformed", () => {
    expect(interpretStep("<tool_call>{oops</tool_call>", [], known, 0)).toMatchObject({ kind: "malformed" });
    const out = interpretStep('<tool_call>{"name":"fs__read","arguments":[1]}</tool_call>', [], known, 0);
    expect(out).toMatchObject({
      kind: "malformed",
      problems: ["the arguments for 'fs__read' must be a JSON object"],
    });
  });
});

// An agent with no tools: a reply that writes <tool_call> (explaining the syntax, or a model's
// habit) was re-prompted as an unknown tool ("available: none") up to max_parse_errors, and its
// response came back with the tags cut out of it.
test("without tools, <tool_call> text is the answer, whole", () => {
  const text = 'Hermes writes <tool_call>{"name": "f", "arguments": {}}</tool_call> in its text.';
  expect(interpretStep(text, [], new Set(), 0)).toEqual({ kind: "final", text });
  const bare = '{"name": "f", "arguments": {}}';
  expect(interpretStep(bare, [], new Set(), 0)).toEqual({ kind: "final", text: bare });
});

test("a chat of an agent without tools answers with <tool_call> text as it was written", async () => {
  const { ChatHarness } = await import("./harness.ts");
  await using h = new ChatHarness({ agents: [{ name: "plain", system_prompt: "Be brief." }] });
  const text = 'Hermes writes <tool_call>{"name": "f", "arguments": {}}</tool_call> in its text.';
  h.llama.script({ content: text });
  const { terminal } = await h.chat("c", { input: "how do tool calls look?" });
  expect(terminal.result).toMatchObject({ response: text, warnings: [] });
  expect(h.llama.requests).toHaveLength(1);
});

// An agent whose tools could not be loaded (its server did not start): a model its prompt told of
// them still calls one, and that call came back as the response, its markup and all, where the
// model was told no tool is available and answered in words.
test("a call of an agent whose tools could not be loaded is told none is available", async () => {
  const { ChatHarness } = await import("./harness.ts");
  await using h = new ChatHarness({
    mcp_servers: [{ name: "t", command: "/nonexistent/mcp-server" }],
  });
  h.llama.script(
    { content: '<tool_call>{"name": "t__echo", "arguments": {"text": "hi"}}</tool_call>' },
    { content: "I cannot reach that tool now." },
  );
  const { terminal } = await h.chat("c", { input: "echo hi" });
  expect(terminal.result).toMatchObject({ response: "I cannot reach that tool now." });
  expect(JSON.stringify(h.llama.requests[1]?.body.messages)).toContain("available: none");
});
