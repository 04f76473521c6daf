import { expect, test } from "bun:test";
import { LlmError } from "../../src/llama/errors.ts";
import { templatedPromptTokens } from "../../src/llama/prompt-tokens.ts";
import { endlessAnswer } from "./endless-answer.ts";

// The prompt's count without its images (llama/prompt-tokens.ts) is asked while llama-server
// reads the prompt, and the step waits for it once the reply is done (agent/turn/llm-step.ts): an
// /apply-template that trickles a byte at a time and never ends held the user's turn unanswered
// after its reply had come, with no deadline but the host's cancel.

test("an /apply-template that never ends is connection_lost at the count's deadline, not awaited for ever", async () => {
  // A byte every 20 ms, the first opening the prompt: a server that never finishes.
  using server = endlessAnswer((n) => new TextEncoder().encode(n === 0 ? '{"prompt":"' : " "), 20);
  const err = await templatedPromptTokens(server, { messages: [] }, new AbortController().signal, 200).catch(
    (e) => e,
  );
  expect(err).toBeInstanceOf(LlmError);
  expect((err as LlmError).kind).toBe("connection_lost");
});
