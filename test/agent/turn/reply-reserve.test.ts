import { expect, test } from "bun:test";
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
