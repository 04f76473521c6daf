/**
 * Where the quoted text opened at `start` closes: the index of the next `quote` not escaped by a
 * backslash, or `text.length` when none does. Linear, for the one-pass readers of JSON lines and
 * template literals (util/json-shape.ts, protocol/exact-id.ts, llama/special-text.ts).
 */
export function quotedEnd(text: string, start: number, quote = 0x22): number {
  let i = start + 1;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x5c) i++;
    else if (c === quote) return i;
  }
  return text.length;
}
