import { wholeCharCut } from "../util/text-cut.ts";
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

/**
 * `text` on one line (FOLDED), cut at a word boundary near `max` characters with "…" when longer. A
 * word is cut only when no space falls in the last third of the allowance (one long word, a
 * URL). Never splits a surrogate pair. Only a head of the text is looked at, grown until it
 * holds more than `max` characters once its white space is folded: a chat's input or a
 * document's text may be megabytes, and all of it was split into characters for a title.
 */
export function cutNear(text: string, max: number): string {
  for (let window = 4 * (max + 1); ; window *= 2) {
    // A window never ends between the two halves of a pair.
    const end = window < text.length ? wholeCharCut(text, window) : window;
    const whole = end >= text.length;
    const folded = text.slice(0, end).replace(FOLDED, " ").trimStart();
    const flat = whole ? folded.trimEnd() : folded;
    const chars = Array.from(flat);
    if (chars.length > max) return cut(chars, max);
    if (whole) return flat;
  }
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
