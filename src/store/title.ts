/**
 * How long a session's title may be before it is cut
 * (docs/protocol.md#conversations-sessions-and-usersdelete: "near 60 characters").
 */
export const TITLE_CHARS = 60;
/** How long the `preview` of a session in `sessions.list` may be. */
export const PREVIEW_CHARS = 120;

/**
 * `text` on one line, cut at a word boundary near `max` characters with "…" when longer. A
 * word is cut only when no space falls in the last third of the allowance (one long word, a
 * URL). Never splits a surrogate pair.
 */
export function cutNear(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  const chars = Array.from(flat);
  if (chars.length <= max) return flat;
  const head = chars.slice(0, max + 1).join("");
  const space = head.lastIndexOf(" ");
  const cut = space >= Math.floor((max * 2) / 3) ? head.slice(0, space) : chars.slice(0, max).join("");
  return `${cut.trimEnd()}…`;
}

/** A session's title from its first user message, until the user renames it. */
export function titleOf(firstUserMessage: string): string {
  return cutNear(firstUserMessage, TITLE_CHARS);
}

export function previewOf(text: string): string {
  return cutNear(text, PREVIEW_CHARS);
}
