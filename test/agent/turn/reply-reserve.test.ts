import { expect, test } from "bun:test";
import { replyReserve } from "../../../src/agent/turn/llm-step.ts";
import { ChatHarness } from "../harness.ts";

// docs/agent.md#history-trimming: the reply's reserve is max_tokens, but a reserve the slot
// cannot give (max_tokens at or past the context per slot) left no budget for any history:
// every turn went out without the conversation before it, silently.

test("max_tokens past the context per slot still lets a short conversation be sent", async () => {
  await using h = new ChatHarness(
    { agents: [{ name: "plain", system_prompt: "Be brief.", max_tokens: 16_384 }] },
    { standIn: () => ({ nCtx: 8192 }) },
  );
  h.llama.script({ content: "Hello Ann" }, { content: "Your name is Ann" });
  const first = await h.chat("c1", { input: "my name is Ann", session_id: "s1" });
  expect(first.terminal.type).toBe("result");
  const second = await h.chat("c2", { input: "what is my name?", session_id: "s1" });
  expect(second.terminal.type).toBe("result");
  const sent = h.llama.requests[1]?.body.messages.map((m) => m.content);
  expect(sent).toEqual(["Be brief.", "my name is Ann", "Hello Ann", "what is my name?"]);
});

// A thinking budget is tokens of the reply too: with only the 1,024 kept for it, the history
// filled the slot up to that and the model's thinking filled the rest, ending with no answer.
// A model whose template does not think (as /props says) spends none of it: kept free all the
// same, it cost the history up to half the slot (an agent's default think, any model).
test("think.budget_tokens is kept free beside the answer's reserve, within half the slot, for a model that thinks", async () => {
  const earlier = "w".repeat(18_000); // some 4,500 tokens as estimated
  const thinking = "{{ '<think>' }}";
  for (const [think, chatTemplate, trimmed] of [
    [undefined, thinking, false],
    [{ budget_tokens: 3000 }, thinking, true],
    [{ budget_tokens: 3000 }, undefined, false],
  ] as const) {
    await using h = new ChatHarness(
      { agents: [{ name: "plain", ...(think ? { think } : {}) }] },
      {
        standIn: () => ({ nCtx: 8192, ...(chatTemplate ? { chatTemplate } : {}) }),
      },
    );
    h.llama.script({ content: "noted" }, { content: "ok" });
    await h.chat("c1", { input: earlier, session_id: "s1" });
    await h.chat("c2", { input: "and now?", session_id: "s1" });
    const sent = h.llama.requests[1]?.body.messages.map((m) => m.content) ?? [];
    // 8,192 less 1,024 holds the 4,500; less 1,024 and 3,000 more it does not.
    expect(sent.includes(earlier)).toBe(!trimmed);
  }
});

test("replyReserve: max_tokens bounds the whole reply, thinking included; a budget adds to the default", () => {
  expect(replyReserve(undefined, 8192)).toBe(1024);
  expect(replyReserve(undefined, 8192, { budget_tokens: 1000 })).toBe(2024);
  expect(replyReserve(undefined, 8192, { budget_tokens: 100_000 })).toBe(4096);
  expect(replyReserve(500, 8192, { budget_tokens: 3000 })).toBe(500);
  expect(replyReserve(undefined, 8192, "high")).toBe(1024);
});
