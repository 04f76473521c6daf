import { describe, expect, test } from "bun:test";
import { interpretStep, MAX_ARGUMENT_DEPTH, nestingDepth } from "../../src/agent/tool-calls.ts";
import { preview, TOOL_RESULT_LIMIT, truncate } from "../../src/agent/tool-runner.ts";
import { repromptMessages } from "../../src/agent/turn/prompt.ts";
import { MAX_STREAMED_CALLS } from "../../src/llama/tool-call-deltas.ts";
import type { ToolCall } from "../../src/protocol/chat-message.ts";
import { runEcho } from "../fixtures/echo-tool.ts";

// What a model's (or a tool's) output can make a turn carry stays bounded per call
// (docs/agent.md#tool-calls, #mcp-servers).

const known = new Set(["t__echo"]);
const call = (i: number, name: string, args: string): ToolCall => ({
  id: `c${i}`,
  type: "function",
  function: { name, arguments: args },
});

/** Whether a string holds a surrogate without its partner (what llama-server's parser refuses). */
const wellFormed = (s: string) => s.isWellFormed();

describe("many malformed calls in one step", () => {
  test("each tool message carries its own call's problem, and the step's list is capped", () => {
    const n = 200;
    const native = Array.from({ length: n }, (_, i) => call(i, "t__echo", `[1,${i}]`));
    const out = interpretStep("", native, known, 0);
    if (out.kind !== "malformed") throw new Error(out.kind);
    expect(out.problems).toHaveLength(6);
    expect(out.problems[5]).toBe(`…and ${n - 5} more`);
    const messages = repromptMessages(out, "", out.problems.join("; "));
    const tools = messages.filter((m) => m.role === "tool");
    expect(tools).toHaveLength(n);
    expect(tools[7]?.content).toBe(
      "Not run: the call was malformed (the arguments for 't__echo' must be a JSON object). Fix it and call again.",
    );
    // Linear: a few hundred characters a call, not the whole list in each.
    const total = tools.reduce((sum, m) => sum + String(m.content).length, 0);
    expect(total).toBeLessThan(n * 200);
  });

  test("a usable call beside malformed ones is told it was not run, without their problems", () => {
    const out = interpretStep("", [call(0, "t__echo", "{}"), call(1, "nope", "{}")], known, 0);
    if (out.kind !== "malformed") throw new Error(out.kind);
    const [first, second] = repromptMessages(out, "", out.problems.join("; ")).slice(1);
    expect(first?.content).toStartWith("Not run: other calls of this step were malformed");
    expect(second?.content).toContain("unknown tool 'nope'");
  });

  // The call goes back to the model in the next request and is stored with the turn: half an
  // emoji is a lone surrogate, which llama-server's JSON parser (and a strict host's) refuses.
  test("a malformed call's long name is cut between characters", () => {
    const out = interpretStep("", [call(0, `${"n".repeat(199)}😀tail`, "{}")], known, 0);
    if (out.kind !== "malformed") throw new Error(out.kind);
    const name = out.toolCalls[0]?.function.name ?? "";
    expect(name.length).toBeLessThanOrEqual(200);
    expect(wellFormed(name)).toBe(true);
  });

  test("an unknown tool's problem lists a bounded part of the known tools", () => {
    const many = new Set(Array.from({ length: 500 }, (_, i) => `server_${i}__tool_with_a_long_name_${i}`));
    const out = interpretStep("", [call(0, "nope", "{}")], many, 0);
    if (out.kind !== "malformed") throw new Error(out.kind);
    expect(out.problems[0]).toContain("server_0__tool_with_a_long_name_0");
    expect(out.problems[0]).toMatch(/…and \d+ more\)$/);
    expect(out.problems[0]?.length).toBeLessThan(1000);
  });
});

describe("deeply nested arguments", () => {
  const deep = (d: number) => `{"text":"x","a":${"[".repeat(d)}${"]".repeat(d)}}`;

  test("a native call nested past the limit is malformed, one within it is a call", () => {
    const out = interpretStep("", [call(0, "t__echo", deep(49_000))], known, 0);
    expect(out).toMatchObject({
      kind: "malformed",
      problems: [`the arguments for 't__echo' are nested deeper than ${MAX_ARGUMENT_DEPTH} levels`],
      toolCalls: [{ function: { arguments: "{}" } }],
    });
    const ok = interpretStep("", [call(0, "t__echo", deep(MAX_ARGUMENT_DEPTH - 1))], known, 0);
    expect(ok.kind).toBe("calls");
  });

  test("a <tool_call> in the text nested past the limit is malformed, not a thrown RangeError", () => {
    const text = `<tool_call>{"name":"t__echo","arguments":${deep(49_000)}}</tool_call>`;
    const out = interpretStep(text, [], known, 0);
    expect(out.kind).toBe("malformed");
  });

  test("nesting is counted outside strings only, without recursion", () => {
    expect(nestingDepth('{"a":"[[[{{{","b":[{"c":"\\"]"}]}')).toBe(3);
    expect(nestingDepth("[".repeat(1_000_000))).toBe(1_000_000);
  });
});

describe("tool text put into the turn", () => {
  const run = runEcho;

  test("a server's error message is cut like a result", async () => {
    const out = await run({
      call: async () => {
        throw new Error("E".repeat(5_000_000));
      },
    });
    expect(out.status).toBe("error");
    expect(out.content.length).toBeLessThan(TOOL_RESULT_LIMIT + 200);
    expect(out.content).toContain("[… truncated:");
  });

  test("a cut never splits a surrogate pair", async () => {
    const text = `${"a".repeat(TOOL_RESULT_LIMIT - 1)}😀tail`;
    const out = await run({ call: async () => ({ text, isError: false }) });
    expect(wellFormed(out.content)).toBe(true);
    expect(out.content).toStartWith("a".repeat(TOOL_RESULT_LIMIT - 1));
    expect(out.content).toContain("[… truncated: 6 more characters not shown]");
    expect(wellFormed(truncate(`ab😀`, 3))).toBe(true);
    expect(wellFormed(preview(`${"b".repeat(198)}😀😀`))).toBe(true);
    expect(wellFormed(preview(`${" ".repeat(1599)}😀`))).toBe(true);
  });

  test("a lone surrogate a server sent is replaced", () => {
    expect(truncate("x\ud83dy")).toBe("x\ufffdy");
  });
});

test("a reply of thousands of <tool_call>s keeps the first 256, as native calls do", () => {
  const text = `<tool_call>{"name":"t__echo","arguments":{"text":"a"}}</tool_call>`.repeat(5000);
  const out = interpretStep(text, [], known, 0);
  if (out.kind !== "calls") throw new Error(out.kind);
  // Each kept call is a tool message stored in the session and sent back every later step.
  expect(out.calls).toHaveLength(MAX_STREAMED_CALLS);
  expect(out.toolCalls).toHaveLength(MAX_STREAMED_CALLS);
  expect(out.text).toBe("");
});
