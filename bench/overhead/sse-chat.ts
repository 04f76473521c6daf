import type { StreamTiming } from "./stream-timing.ts";

/** One streamed chat's timing and llama-server's own counters for it. */
export interface SseChat extends StreamTiming {
  /** `timings.prompt_n` (tokens processed) and `timings.cache_n` (taken from the cache). */
  promptN?: number;
  cacheN?: number;
  /** The reply's text, to carry a conversation on. */
  text: string;
}

/**
 * One streamed `/v1/chat/completions` (content deltas, or reasoning deltas for a thinking
 * template: `piece`, timed from the request's start), greedy,
 * a fresh connection each (llama-server drops idle keep-alive ones). `model` names the router's.
 */
export async function sseChat(
  baseUrl: string,
  body: { model?: string; messages: unknown[]; max_tokens: number },
  apiKey?: string,
  piece: "content" | "reasoning_content" = "content",
): Promise<SseChat> {
  const sent = performance.now();
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...(apiKey ? { Authorization: `Bearer ${apiKey}` } : {}) },
    body: JSON.stringify({ ...body, temperature: 0, stream: true, stream_options: { include_usage: true } }),
    keepalive: false,
  });
  if (!res.ok || !res.body) throw new Error(`llama-server answered ${res.status}: ${await res.text()}`);
  const out: SseChat = { sent, first: 0, last: 0, pieces: 0, chars: 0, firstChars: 0, text: "" };
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of res.body) {
    const now = performance.now();
    buffer += decoder.decode(bytes, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end !== -1) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6)) as {
        choices?: { delta?: { content?: string | null; reasoning_content?: string | null } }[];
        timings?: { prompt_ms?: number; prompt_n?: number; cache_n?: number };
        error?: unknown;
      };
      if (chunk.error) throw new Error(`llama-server mid-stream: ${JSON.stringify(chunk.error)}`);
      if (chunk.timings) {
        out.promptMs = chunk.timings.prompt_ms;
        out.promptN = chunk.timings.prompt_n;
        out.cacheN = chunk.timings.cache_n;
      }
      const content = chunk.choices?.[0]?.delta?.[piece];
      if (typeof content !== "string" || content === "") continue;
      if (out.pieces === 0) [out.first, out.firstChars] = [now, content.length];
      out.last = now;
      out.chars += content.length;
      out.pieces++;
      out.text += content;
    }
  }
  // A reply of only special tokens streams no content: its end is its first token.
  if (out.pieces === 0) out.first = out.last = performance.now();
  return out;
}
