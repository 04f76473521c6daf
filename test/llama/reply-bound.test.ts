import { afterEach, describe, expect, test } from "bun:test";
import { CHARS_PER_TOKEN, streamCompletion } from "../../src/llama/completion.ts";
import { LlmError } from "../../src/llama/errors.ts";
import { MAX_STREAMED_CALLS } from "../../src/llama/tool-call-deltas.ts";
import type { ToolCall } from "../../src/protocol/chat-message.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";

// A step's reply is bounded by what the context can hold (docs/agent.md "How a turn ends"): a
// server streaming deltas forever, or thousands of tool calls, ends as bad_response naming the
// bound instead of being held, stored and paid for on the main loop.

const delta = (d: Record<string, unknown>) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: d, finish_reason: null }] })}\n\n`;
const finish = `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\ndata: [DONE]\n\n`;

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});

async function run(
  raw: string[],
  maxChars?: number,
): Promise<{ error?: LlmError; content: string; calls?: ToolCall[] }> {
  standIn = new LlamaStandIn().script({ raw: [...raw, finish] });
  const deltas: string[] = [];
  try {
    const result = await streamCompletion(
      standIn,
      { messages: [{ role: "user", content: "x" }] },
      { signal: new AbortController().signal, onDelta: (d) => deltas.push(d), maxChars },
    );
    return { content: deltas.join(""), calls: result.toolCalls };
  } catch (err) {
    if (err instanceof LlmError) return { error: err, content: deltas.join("") };
    throw err;
  }
}

describe("a reply past what the context can hold", () => {
  const piece = "x".repeat(100);
  test("content, reasoning and tool-call arguments count together against maxChars", async () => {
    const raw = [
      delta({ content: piece }),
      delta({ reasoning_content: piece }),
      delta({
        tool_calls: [{ index: 0, id: "a", type: "function", function: { name: "f", arguments: piece } }],
      }),
    ];
    expect((await run(raw, 301)).error).toBeUndefined();
    const over = await run(raw, 300);
    expect(over.error?.kind).toBe("bad_response");
    expect(over.error?.message).toContain("more than 300 characters");
    expect(over.error?.message).toContain(`${CHARS_PER_TOKEN} a token`);
  });

  test("deltas past the bound end the request; what had come is handed on first", async () => {
    const out = await run(
      Array.from({ length: 50 }, () => delta({ content: piece })),
      1000,
    );
    expect(out.error?.kind).toBe("bad_response");
    expect(out.content.length).toBeGreaterThan(0);
  });

  // A runaway model's calls past the bound are the model's slip, not a broken server: the reply
  // goes on with the first ones (the step runs 64, answers the rest as not run).
  test(`more than ${MAX_STREAMED_CALLS} tool calls: the first ${MAX_STREAMED_CALLS} kept, the rest not assembled`, async () => {
    const call = (i: number) =>
      delta({
        tool_calls: [{ index: i, id: `c${i}`, type: "function", function: { name: "f", arguments: "{}" } }],
      });
    const out = await run(Array.from({ length: MAX_STREAMED_CALLS + 40 }, (_, i) => call(i)));
    expect(out.error).toBeUndefined();
    expect(out.calls).toHaveLength(MAX_STREAMED_CALLS);
    expect(out.calls?.at(-1)?.function.name).toBe("f");
  });
});
