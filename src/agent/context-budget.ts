import type { ChatMessage } from "../protocol/chat-message.ts";

/**
 * Token estimates without a tokenizer: about 4 characters per token for English-like text,
 * plus a few tokens of chat-template overhead per message. Deliberately rough; the real
 * check is llama-server's own (an overflow is retried with a smaller history).
 */
export const CHARS_PER_TOKEN = 4;
const PER_MESSAGE_TOKENS = 6;

export function estimateTokens(value: ChatMessage | string | unknown): number {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  return Math.ceil(text.length / CHARS_PER_TOKEN) + (typeof value === "string" ? 0 : PER_MESSAGE_TOKENS);
}

export function estimateAll(values: readonly unknown[]): number {
  return values.reduce<number>((n, v) => n + estimateTokens(v), 0);
}

/**
 * Keeps the newest whole turns of `history` that fit in `budget` tokens. A turn starts at a
 * user message and carries its assistant and tool messages, so a tool result is never kept
 * without the call it answers. Older turns go first; the history on disk keeps them all.
 */
export function trimHistory(
  history: readonly ChatMessage[],
  budget: number,
): { kept: ChatMessage[]; dropped: number } {
  const turns: ChatMessage[][] = [];
  for (const m of history) {
    if (m.role === "user" || turns.length === 0) turns.push([m]);
    else turns[turns.length - 1]?.push(m);
  }
  const kept: ChatMessage[][] = [];
  let used = 0;
  for (let i = turns.length - 1; i >= 0; i--) {
    const turn = turns[i] ?? [];
    const cost = estimateAll(turn);
    if (used + cost > budget) break;
    kept.unshift(turn);
    used += cost;
  }
  const flat = kept.flat();
  return { kept: flat, dropped: history.length - flat.length };
}
