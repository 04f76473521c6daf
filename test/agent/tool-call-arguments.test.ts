import { describe, expect, test } from "bun:test";
import { interpretStep } from "../../src/agent/tool-calls.ts";
import type { ToolCall } from "../../src/protocol/chat-message.ts";
import { parseLikeLlama } from "../fixtures/llama-stand-in/json-body.ts";
import { ChatHarness } from "./harness.ts";

// Arguments Bun's JSON.parse takes but llama-server's parser (nlohmann) refuses: a lone
// surrogate escape, a number past a double. Sent back in the history, such a call fails every
// later request of the turn ("Failed to parse tool call arguments as JSON", a 500 that restarts
// the server and quotes the model's text in the core's log) (docs/agent.md#tool-calls).

const known = new Set(["t__echo"]);
const call = (args: string, name = "t__echo"): ToolCall => ({
  id: "c0",
  type: "function",
  function: { name, arguments: args },
});

describe("arguments llama-server cannot read back", () => {
  for (const [what, args] of [
    ["a lone high surrogate escape", '{"text":"a\\ud800b"}'],
    ["a lone low surrogate escape", '{"text":"\\udc00"}'],
    ["a lone surrogate escape in a key", '{"\\ud83d":"x"}'],
    ["a number past a double", '{"text":"x","n":1e400}'],
    ["a number of 400 digits", `{"n":${"9".repeat(400)}}`],
  ] as const) {
    test(`${what} is a malformed call, sent back as {}`, () => {
      const out = interpretStep("", [call(args)], known, 0);
      expect(out.kind).toBe("malformed");
      if (out.kind !== "malformed") return;
      expect(out.toolCalls[0]?.function.arguments).toBe("{}");
      expect(out.problems[0]).toContain("t__echo");
    });
  }

  test("a number past a double in a <tool_call> written in the text is malformed, not run with null", () => {
    const out = interpretStep(
      '<tool_call>{"name":"t__echo","arguments":{"n":1e400}}</tool_call>',
      [],
      known,
      0,
    );
    expect(out.kind).toBe("malformed");
    if (out.kind !== "malformed") return;
    expect(out.problems[0]).toContain("too large for a double");
  });

  test("a surrogate pair written as escapes is a call", () => {
    const out = interpretStep("", [call('{"text":"\\ud83d\\ude00"}')], known, 0);
    expect(out).toMatchObject({ kind: "calls", calls: [{ args: { text: "😀" } }] });
  });

  test("an unknown tool's arguments with a lone surrogate escape are not sent back", () => {
    const out = interpretStep("", [call('{"a":"\\ud800"}', "nope")], known, 0);
    expect(out).toMatchObject({ kind: "malformed", toolCalls: [{ function: { arguments: "{}" } }] });
  });

  test("a <tool_call> in the text with a lone surrogate escape is malformed", () => {
    const text = '<tool_call>{"name":"t__echo","arguments":{"text":"\\ud800"}}</tool_call>';
    expect(interpretStep(text, [], known, 0).kind).toBe("malformed");
  });

  test("an unknown name with a lone surrogate is told well-formed", () => {
    const text = '<tool_call>{"name":"x\\ud800","arguments":{}}</tool_call>';
    const out = interpretStep(text, [], known, 0);
    if (out.kind !== "malformed") throw new Error(out.kind);
    expect(out.problems.every((p) => p.isWellFormed())).toBe(true);
  });

  // Bun's parser quotes the token it stopped at, half of it when that is an emoji.
  test("arguments broken at an emoji are told well-formed, in the text or native", () => {
    const native = interpretStep("", [call('{"text": 😀}')], known, 0);
    const text = interpretStep('<tool_call>{"name": 😀}</tool_call>', [], known, 0);
    for (const out of [native, text]) {
      if (out.kind !== "malformed") throw new Error(out.kind);
      expect(out.problems[0]).toContain("not valid JSON");
      expect(out.problems.every((p) => p.isWellFormed())).toBe(true);
    }
  });
});

test("a turn whose model writes a lone surrogate escape in its arguments sends llama-server nothing it refuses", async () => {
  await using h = new ChatHarness();
  h.llama.script(
    { tool_calls: [{ name: "t__echo", arguments: '{"text":"a\\ud800"}', id: "call0" }] },
    { content: ["done"] },
  );
  const { terminal, events } = await h.chat("c", { input: "go" });
  expect(terminal.type).toBe("result");
  // No tool_start carries the lone surrogate to the host either.
  for (const e of events.filter((e) => e.event === "tool_start"))
    expect(JSON.stringify(e.args).includes("\\ud800")).toBe(false);
  const second = h.llama.requests[1]?.body.messages ?? [];
  for (const m of second as { tool_calls?: ToolCall[] }[])
    for (const tc of m.tool_calls ?? []) expect(parseLikeLlama(tc.function.arguments)).toHaveProperty("body");
});

// llama-server gives a call whose JSON had no "arguments" key (a tool without parameters) empty
// arguments; sent back as they came, they are no JSON its template can parse.
test("a call with empty arguments runs with {} and is sent back with {}", async () => {
  await using h = new ChatHarness();
  h.llama.script(
    {
      tool_calls: [
        { name: "t__echo", arguments: "", id: "call0" },
        { name: "t__echo", arguments: " \n", id: "call1" },
      ],
    },
    { content: ["done"] },
  );
  const { terminal, events } = await h.chat("c", { input: "go", session_id: "empty-args" });
  expect(terminal.result).toMatchObject({ response: "done" });
  expect(events.filter((e) => e.event === "tool_start").map((e) => e.args)).toEqual([{}, {}]);
  const second = h.llama.requests[1]?.body.messages ?? [];
  const sent = (second as { tool_calls?: ToolCall[] }[]).flatMap((m) => m.tool_calls ?? []);
  expect(sent).toHaveLength(2);
  for (const tc of sent) expect(parseLikeLlama(tc.function.arguments)).toHaveProperty("body");
});
