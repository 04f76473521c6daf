/**
 * Where text is cut to a bound (a title, a tool's result, a document's long line): never between
 * the two halves of a surrogate pair, and where it can be, after white space.
 */

/** `at`, or one before it when a cut there would split a surrogate pair. */
export function wholeCharCut(text: string, at: number): number {
  const c = text.charCodeAt(at - 1);
  return c >= 0xd800 && c <= 0xdbff ? at - 1 : at;
}

/** `text` cut to `max` characters with "…" when longer, never inside a surrogate pair. */
export function cutText(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, wholeCharCut(text, max))}…` : text;
}

/** Just after the last white space in `text[from, to)`, looking back no further than `after`; -1 when none. */
export function afterLastSpace(text: string, to: number, after: number): number {
  for (let i = to; i > after; i--) if (/\s/.test(text[i - 1] as string)) return i;
  return -1;
}
