/**
 * How long a session's title may be before it is cut
 * (docs/protocol.md#conversations-sessions-and-usersdelete: "near 60 characters").
 */
export const TITLE_CHARS = 60;
/** How long the `preview` of a session in `sessions.list` may be. */
export const PREVIEW_CHARS = 120;
/**
 * Folded to one space with white space: control characters (NUL, escape, NEL…) and bidi
 * overrides and isolates, which `sessions.rename` refuses in a title since a host's list shows
 * it on one line and an override reorders what follows. A chat's first message is any text.
 * A search hit's snippet is folded so too (store/session-search.ts).
 */
export const FOLDED = /[\s\p{Cc}\u202a-\u202e\u2066-\u2069]+/gu;

/** What FOLDED leaves, a word or a piece of a long one: at most 256 characters, never half a pair. */
const WORD_PIECE = /[^\s\p{Cc}\u202a-\u202e\u2066-\u2069]{1,256}/gu;

/**
 * `text` on one line (FOLDED), cut at a word boundary near `max` characters with "…" when longer. A
 * word is cut only when no space falls in the last third of the allowance (one long word, a
 * URL). Never splits a surrogate pair. Only the words of its head are taken, each found by one
 * native search past the white space before it: a chat's input or a document's text may be
 * megabytes, and a head of it grown by doubling folded megabytes of leading white space again
 * and again (16 MiB of it held the loop 77 ms).
 */
export function cutNear(text: string, max: number): string {
  const pieces = new RegExp(WORD_PIECE);
  const chars: string[] = [];
  let end = 0;
  for (let m = pieces.exec(text); m; m = pieces.exec(text)) {
    // Pieces of one long word join as they were; white space between two is one space.
    if (chars.length > 0 && m.index > end) chars.push(" ");
    for (const c of m[0]) chars.push(c);
    end = m.index + m[0].length;
    if (chars.length > max) return cut(chars, max);
  }
  return chars.join("");
}

function cut(chars: string[], max: number): string {
  const head = chars.slice(0, max + 1).join("");
  const space = head.lastIndexOf(" ");
  const kept = space >= Math.floor((max * 2) / 3) ? head.slice(0, space) : chars.slice(0, max).join("");
  return `${kept.trimEnd()}…`;
}

/** A session's title from its first user message, until the user renames it. */
export function titleOf(firstUserMessage: string): string {
  return cutNear(firstUserMessage, TITLE_CHARS);
}

export function previewOf(text: string): string {
  return cutNear(text, PREVIEW_CHARS);
}
