import type { ChatMessage } from "../protocol/chat-message.ts";
import { isWriteAgain } from "./write-again.ts";

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
 * How much of the budget the history may fill right after a trim: the rest is room for the turns to
 * come, which then reuse the new prefix (docs/agent.md#history-trimming: at least a quarter goes at
 * once).
 */
export const KEEP_AFTER_TRIM = 0.5;

/**
 * The first history message to send (the cut) within `budget` tokens. The cut stays where it
 * was while what follows it fits, so the prompt keeps the prefix the slot holds; once it does
 * not, the oldest whole turns go at once until at most KEEP_AFTER_TRIM of the budget is left.
 * A turn starts at a user message and carries its assistant and tool messages, so a tool
 * result is never sent without the call it answers. `cost(i)` is what message i costs as sent
 * (never negative). The database keeps every message either way.
 */
export function trimInSteps(
  history: readonly ChatMessage[],
  cost: (i: number) => number,
  cut: number,
  budget: number,
): number {
  // A cut inside a turn (the history was rewritten since) moves to the next turn's start.
  // Looked for from the cut on: all the turn starts from seq 0 walked a long session's whole
  // history each step.
  let from = Math.max(0, Math.ceil(cut));
  if (!(from < history.length)) from = history.length;
  while (from < history.length && !opensTurn(history, from)) from++;
  const target = Math.floor(budget * KEEP_AFTER_TRIM);
  // Summed from the end, and only while within the budget (a cost is never negative, so what
  // starts earlier costs more): a long session's first turn (no cut kept) costed all 100k
  // messages, a JSON.stringify each, on the main loop, to send the few that fit.
  let sum = 0;
  let fit = history.length;
  for (let i = history.length - 1; i >= from; i--) {
    sum += cost(i);
    // Over: the cut is the first turn start whose messages fit the target, walked past already.
    if (!(sum <= budget)) return fit;
    if (sum <= target && opensTurn(history, i)) fit = i;
  }
  // Everything from the cut fits, and it stays.
  return from;
}

/**
 * Whether message i starts a turn: a user message, the first message in any case. The core's
 * own request to write again is a user message inside a turn: a cut there sent the model the
 * request without the question it was about.
 */
function opensTurn(history: readonly ChatMessage[], i: number): boolean {
  const m = history[i] as ChatMessage;
  return i === 0 || (m.role === "user" && !isWriteAgain(m));
}

/**
 * The first history message whose images are sent (docs/protocol.md#images): images cost far
 * more than words, so when the history from `from` does not fit `budget` they go before any
 * text does, oldest turns first, until what is left fits KEEP_AFTER_TRIM of the budget (so the
 * next turns reuse the new prefix); older ones are sent as the text `[image]`. Like the cut it
 * stays where it was while everything fits. `text(i)` is message i's cost without its images,
 * `image(i)` what its images cost (neither negative).
 */
export function imagesFrom(
  history: readonly ChatMessage[],
  text: (i: number) => number,
  image: (i: number) => number,
  from: number,
  imageCut: number,
  budget: number,
): number {
  // Each message's costs asked once, summed from the end (summed anew for each turn start, a
  // first turn in a session of 20k messages held the loop 41 s); the words first, and only while
  // within the budget: over it, no turn start from `from` on leaves half of it whatever the
  // images (a cost is never negative), so all of them go, and the rest is never costed.
  let words = 0;
  for (let i = history.length - 1; i >= from && words <= budget; i--) words += text(i);
  if (!(words <= budget)) return history.length;
  const images = suffixSums(history.length, from, image);
  const costFrom = (cut: number) => words + (images[Math.max(cut, from)] ?? 0);
  if (costFrom(imageCut) <= budget) return imageCut;
  const target = Math.floor(budget * KEEP_AFTER_TRIM);
  // Each turn start before `from` costs as `from` does (only from there on is sent): over the
  // target, none of them is looked at (a long session's image cut still at 0 walked every
  // message before its cut each step).
  let s = imageCut + 1;
  if (s < from && costFrom(from) > target) s = from;
  for (; s < history.length; s++) if (opensTurn(history, s) && costFrom(s) <= target) return s;
  return history.length;
}

/** `sums[i]`: `cost` of the messages from i to the end, for i from `from` (0 before it and past the end). */
function suffixSums(length: number, from: number, cost: (i: number) => number): number[] {
  const sums = new Array<number>(length + 1).fill(0);
  for (let i = length - 1; i >= from; i--) sums[i] = (sums[i + 1] ?? 0) + cost(i);
  return sums;
}
