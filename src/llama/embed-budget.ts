/**
 * How much one embedding request holds and how long it may take (docs/protocol.md#embed).
 * llama-server's /v1/embeddings says nothing until every input of the request is embedded (no
 * stream, no progress event, no ping: recordings 112–116), so a wedged task loop and a slow batch
 * look alike, and time is the only sign. A request's tokens are counted by the server only in its
 * answer (`usage.prompt_tokens`), so they are estimated high beforehand: a UTF-8 byte a token (a
 * tokenizer's worst case; English text is about 4 bytes a token), two more for the markers around
 * each input ([CLS]/[SEP], BOS/EOS), and never more than the slot's context, which no input passes
 * (recording 114: one longer is refused before it is embedded).
 */

/** Estimated tokens one request holds at most (one input longer still goes alone). */
export const REQUEST_TOKENS = 8_192;
/**
 * The pessimistic rate the deadline counts with: estimated tokens a second. At a byte a token that
 * is about 5 real tokens of English a second, well below what the slowest CPU reads with a small
 * embedding model; a full request's deadline is then 410 s.
 */
export const FLOOR_TOKENS_PER_S = 20;
/**
 * The longest wait for the work queued ahead of a request, in request_timeout_s: as a chat's prompt
 * batch (watchdog.ts EVENTLESS_CAP). The request's own work is never cut by it (`requestDeadlineMs`).
 */
export const DEADLINE_CAP = 10;
/** The markers a model puts around each input. */
const MARKERS = 2;

/**
 * What an input is taken to hold at most when the slot's context is not known (`/props` unread):
 * the longest context of the embedding models in use (Qwen3-Embedding's 32,768). Counted by its
 * bytes alone, a 1 MiB input's own work gave its request a deadline of about 14 hours, and a
 * wedged server went unseen that long.
 */
export const UNKNOWN_CONTEXT_TOKENS = 32_768;

/** One input's tokens, estimated high; `maxTokens` the slot's context, when known. */
export function inputTokens(text: string, maxTokens?: number): number {
  const n = Buffer.byteLength(text, "utf8") + MARKERS;
  return Math.min(n, maxTokens !== undefined && maxTokens > 0 ? maxTokens : UNKNOWN_CONTEXT_TOKENS);
}

/** How many of `tokens`, from `at`, go in one request: at most `most` inputs and REQUEST_TOKENS, at least one. */
export function requestSize(tokens: readonly number[], at: number, most: number): number {
  let sum = tokens[at] ?? 0;
  let n = 1;
  while (n < most && at + n < tokens.length && sum + (tokens[at + n] ?? 0) <= REQUEST_TOKENS) {
    sum += tokens[at + n] ?? 0;
    n++;
  }
  return n;
}

/**
 * A request's deadline: `tokens` (its own `own` and those in flight ahead of it on the server) at
 * FLOOR_TOKENS_PER_S, never under `floorMs` (llama.request_timeout_s) nor under its own work at
 * that rate; the work ahead counts up to DEADLINE_CAP times `floorMs`. The cap bounds how long a
 * wedge behind a queue goes unseen; it never cuts the request's own work: with a low
 * request_timeout_s (5 s: a 50 s cap), a full request (410 s at the floor rate) on a slow CPU
 * would be aborted while honest, and its server restarted, again at each try.
 */
export function requestDeadlineMs(
  tokens: number,
  floorMs: number,
  own = tokens,
  rate = FLOOR_TOKENS_PER_S,
): number {
  const at = (n: number) => Math.ceil((n / rate) * 1000);
  return Math.max(floorMs, at(own), Math.min(at(tokens), DEADLINE_CAP * floorMs));
}
