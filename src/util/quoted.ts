/**
 * Where the quoted text opened at `start` closes: the index of the next `quote` not escaped by a
 * backslash, or `text.length` when none does. Linear, for the one-pass readers of JSON lines and
 * template literals (util/json-shape.ts, protocol/exact-id.ts, llama/special-text.ts). The quote
 * is found by indexOf, not a character at a time in JavaScript: a host's 8 MiB image line took
 * 21-40 ms so (protocol/crowded-line.ts), beside its parse's 20 ms. A quote is escaped when an odd
 * run of backslashes comes before it; each run is read once, so it stays linear.
 */
export function quotedEnd(text: string, start: number, quote = 0x22): number {
  const mark = String.fromCharCode(quote);
  let from = start + 1;
  for (;;) {
    const at = text.indexOf(mark, from);
    if (at < 0) return text.length;
    let backslashes = 0;
    while (at - backslashes - 1 > start && text.charCodeAt(at - backslashes - 1) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return at;
    from = at + 1;
  }
}
