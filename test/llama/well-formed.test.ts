import { afterEach, describe, expect, test } from "bun:test";
import { streamCompletion } from "../../src/llama/completion.ts";
import { embed } from "../../src/llama/embeddings.ts";
import { templatedPromptTokens } from "../../src/llama/prompt-tokens.ts";
import { tokenize } from "../../src/llama/tokenize.ts";
import { wellFormedJson } from "../../src/llama/well-formed.ts";
import { TINY_EMBED } from "../fixtures/llama-stand-in/embeddings.ts";
import { LlamaStandIn } from "../fixtures/llama-stand-in/in-process.ts";

// llama-server refuses a body with a lone surrogate whole (transcripts/20d; the stand-in does
// too): what the core sends it that did not come from the host's params (a tool's result, a stored
// passage, a config's prompt) is made well-formed on the way.

const LONE = "a tool said \ud800 then \udc00.";

let standIn: LlamaStandIn | undefined;
afterEach(() => {
  standIn?.stop();
  standIn = undefined;
});

describe("wellFormedJson", () => {
  test("lone surrogates become U+FFFD; pairs and text that spells an escape stay", () => {
    expect(JSON.parse(wellFormedJson({ a: [LONE] }))).toEqual({ a: ["a tool said \ufffd then \ufffd."] });
    const fine = { t: "smile \ud83d\ude00, and a backslash: \\ud800" };
    expect(wellFormedJson(fine)).toBe(JSON.stringify(fine));
  });

  test("an object's keys too: a tool schema's property named with a lone surrogate", () => {
    const schema = {
      type: "object",
      properties: { "x\udc00": { type: "string", description: "y\ud800" } },
    };
    const sent = wellFormedJson({ tools: [{ function: { parameters: schema } }] });
    expect(sent).not.toMatch(/\\ud[89a-f]/);
    expect(JSON.parse(sent).tools[0].function.parameters.properties).toEqual({
      "x\ufffd": { type: "string", description: "y\ufffd" },
    });
  });
});

describe("requests with a lone surrogate reach the stand-in well-formed (20d)", () => {
  test("a chat step's tool result", async () => {
    standIn = new LlamaStandIn({ nCtx: 2048 });
    standIn.model.script({ content: "fine" });
    const messages = [
      { role: "user", content: "go" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "t", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: LONE },
    ];
    const result = await streamCompletion(
      standIn,
      { messages, max_tokens: 8 },
      {
        signal: new AbortController().signal,
        onDelta: () => {},
      },
    );
    expect(result.content).toBe("fine");
    expect(standIn.model.requests.at(-1)?.body.messages[2]?.content).toBe("a tool said \ufffd then \ufffd.");
  });

  test("/tokenize, /apply-template and /v1/embeddings", async () => {
    standIn = new LlamaStandIn({ nCtx: 2048 });
    expect((await tokenize(standIn, LONE)).length).toBeGreaterThan(0);
    const n = await templatedPromptTokens(
      standIn,
      { messages: [{ role: "user", content: LONE }] },
      new AbortController().signal,
    );
    expect(n).toBeGreaterThan(0);
    standIn.stop();
    standIn = new LlamaStandIn({ nCtx: 512, embedding: TINY_EMBED });
    const out = await embed(standIn, ["fine", LONE]);
    expect(out.embeddings).toHaveLength(2);
  });
});

test("an object copied for a malformed key keeps a __proto__ key as a key, its prototype untouched", () => {
  const value = JSON.parse('{"__proto__": {"polluted": true}, "bad\\ud800": 1}');
  const text = wellFormedJson(value);
  expect(JSON.parse(text)).toEqual(JSON.parse('{"__proto__": {"polluted": true}, "bad\\ufffd": 1}'));
  expect(text).toContain('"__proto__"');
});
