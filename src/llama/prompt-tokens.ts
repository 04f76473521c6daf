import { LlmError } from "./errors.ts";
import { callJson, type LlamaEndpoint } from "./http.ts";
import { wellFormedJson } from "./well-formed.ts";

/**
 * How long each of the two calls may take, answer included. Both run on llama-server's HTTP
 * threads, beside the task loop, in milliseconds; the step waits for the count once its reply is
 * done (agent/turn/llm-step.ts), so one that never ends (a server trickling its answer) would
 * hold the user's turn with no end but a cancel. Past it the count is unknown, as for any failure.
 */
export const COUNT_TIMEOUT_MS = 30_000;

/**
 * How many tokens a chat request's prompt is without running it: POST /apply-template (the
 * template llama-server would apply to the same body, test/fixtures/llama-server/transcripts/32)
 * and POST /tokenize of that prompt with the special tokens it adds (`add_special`). For a body
 * of text alone this is the chat's `prompt_tokens` exactly (103: 16 and 16), so a request with
 * images, less this count of it without them, is what the images added (docs/protocol.md#images).
 * Neither call posts a task or takes a slot.
 */
export async function templatedPromptTokens(
  server: LlamaEndpoint,
  body: Record<string, unknown>,
  signal: AbortSignal,
  timeoutMs = COUNT_TIMEOUT_MS,
): Promise<number> {
  const templated = (await callJson(server, "/apply-template", {
    body: wellFormedJson(body),
    signal,
    timeoutMs,
  })) as {
    prompt?: unknown;
  } | null;
  if (typeof templated?.prompt !== "string")
    throw new LlmError("bad_response", "llama-server's /apply-template has no prompt");
  const tokenized = (await callJson(server, "/tokenize", {
    body: wellFormedJson({ content: templated.prompt, add_special: true }),
    signal,
    timeoutMs,
  })) as { tokens?: unknown } | null;
  if (!Array.isArray(tokenized?.tokens))
    throw new LlmError("bad_response", "llama-server's /tokenize has no tokens");
  return tokenized.tokens.length;
}
