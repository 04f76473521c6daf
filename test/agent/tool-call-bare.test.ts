import { expect, test } from "bun:test";
import { interpretStep } from "../../src/agent/tool-calls.ts";
import { ChatHarness } from "./harness.ts";

// A reply that is nothing but a call's JSON (docs/agent.md#tool-calls) is the call, not text
// beside it: as the `<tool_call>` form's tags are cut out of the text, so is the bare object.
// Kept as the step's text, it was stored as the assistant's words beside the same call, sent
// back to the model twice, and at a limit given to the user as the turn's best text.

test("a bare JSON call leaves no text of its own", () => {
  const known = new Set(["fs__read"]);
  expect(interpretStep('{"name":"fs__read","arguments":{"path":"a"}}', [], known, 0)).toMatchObject({
    kind: "calls",
    text: "",
  });
  expect(interpretStep(' {"name":"fs__read","arguments":[1]} ', [], known, 0)).toMatchObject({
    kind: "malformed",
    text: "",
  });
});

test("the step limit after a bare JSON call answers without the call's JSON", async () => {
  await using h = new ChatHarness({ agents: [{ name: "a", tools: ["t.echo"], max_steps: 1 }] });
  h.llama.script({ content: ['{"name": "t__echo", "arguments": {"text": "secret plan"}}'] });
  const { terminal } = await h.chat("c", { input: "loop", session_id: "bare" });
  expect(terminal.result).toMatchObject({ response: "", warnings: [{ code: "max_steps" }] });
  const assistant = h.history("bare").find((m) => m.role === "assistant");
  expect(assistant).toMatchObject({ content: null, tool_calls: [{ function: { name: "t__echo" } }] });
});

// A reply that begins with a call's JSON and ends with a brace but is not one JSON value holds
// words of its own: cut as if it were the call, the user's response at max_parse_errors was
// empty and the stored turn lost what the model wrote beside it.
test("a reply that only begins like a bare call keeps its words", () => {
  const known = new Set(["fs__read"]);
  const reply = '{"name":"fs__read","arguments":{"path":"a"}}\n\nThe file says hi: {"ok": true}';
  expect(interpretStep(reply, [], known, 0)).toMatchObject({ kind: "malformed", text: reply });
});

// One JSON value whose number or string llama-server cannot read (tool-calls.ts `unreadable`) is
// still only the call: kept as text, it was the turn's response at max_parse_errors, the call's
// JSON given to the user, as before 6a167731.
test("a bare call whose arguments llama-server cannot read leaves no text either", () => {
  const known = new Set(["fs__read"]);
  for (const reply of [
    '{"name":"fs__read","arguments":{"n":1e400}}',
    '{"name":"fs__read","arguments":{"p":"\\ud800"}}',
  ])
    expect(interpretStep(reply, [], known, 0)).toMatchObject({ kind: "malformed", text: "" });
});

// As deep: one JSON value nested past the limit is the call alone, refused for its depth.
test("a bare call nested too deep leaves no text either", () => {
  const known = new Set(["fs__read"]);
  const reply = `{"name":"fs__read","arguments":{"a":${"[".repeat(100)}${"]".repeat(100)}}}`;
  expect(interpretStep(reply, [], known, 0)).toMatchObject({ kind: "malformed", text: "" });
  const worded = `${reply.slice(0, -1)}} and then {}`;
  expect(interpretStep(worded, [], known, 0)).toMatchObject({ kind: "malformed", text: worded });
});
