import { LlmError } from "./errors.ts";
import { callJson, type LlamaEndpoint } from "./http.ts";
import { wellFormedJson } from "./well-formed.ts";

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
): Promise<number> {
  const templated = (await callJson(server, "/apply-template", { body: wellFormedJson(body), signal })) as {
    prompt?: unknown;
  } | null;
  if (typeof templated?.prompt !== "string")
    throw new LlmError("bad_response", "llama-server's /apply-template has no prompt");
  const tokenized = (await callJson(server, "/tokenize", {
    body: wellFormedJson({ content: templated.prompt, add_special: true }),
    signal,
  })) as { tokens?: unknown } | null;
  if (!Array.isArray(tokenized?.tokens))
    throw new LlmError("bad_response", "llama-server's /tokenize has no tokens");
  return tokenized.tokens.length;
}
