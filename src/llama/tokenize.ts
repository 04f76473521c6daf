import { readCapped } from "../util/capped-body.ts";
import { LlmError, MAX_ERROR_BODY_BYTES } from "./errors.ts";
import { call, callJson, type LlamaEndpoint } from "./http.ts";
import { wellFormedJson } from "./well-formed.ts";

/**
 * POST /tokenize (test/fixtures/llama-server/transcripts/30, 30b): the model's tokens for a text.
 * It needs the model, so a sleeping server reloads it first (85), and it posts no task and takes no
 * slot.
 */

/** The token ids of `content` (with or without the pieces llama-server may add to each). */
export async function tokenize(
  server: LlamaEndpoint,
  content: string,
  signal?: AbortSignal,
): Promise<number[]> {
  const body = (await callJson(server, "/tokenize", { body: wellFormedJson({ content }), signal })) as {
    tokens?: unknown;
  } | null;
  const tokens = body?.tokens;
  if (!Array.isArray(tokens)) throw new LlmError("bad_response", "llama-server's /tokenize has no tokens");
  return tokens.map((t) => {
    const id = typeof t === "object" && t !== null ? (t as { id?: unknown }).id : t;
    if (typeof id !== "number")
      throw new LlmError("bad_response", "llama-server's /tokenize has a token that is not a number");
    return id;
  });
}

/**
 * Wakes a sleeping llama-server and waits until its model is back: the tokens of nothing are
 * the cheapest request that needs the model, and llama-server holds it until the reload is
 * done. Whatever it answers, it answered after the wait: it is awake. Rejects with the
 * signal's reason when `signal` aborts, `connection_lost` when nothing answers.
 */
export async function awaitModel(server: LlamaEndpoint, signal: AbortSignal): Promise<void> {
  const res = await call(server, "/tokenize", { body: '{"content":""}', signal });
  // Dropped, and bounded: an answer that never ends would fill memory (http.ts statusOf).
  await readCapped(res, MAX_ERROR_BODY_BYTES);
}
