/**
 * What a name or title shown on one line may not hold (a host's list, a citation): control
 * characters (NUL, tabs, newlines, ESC…), line and paragraph separators, and the bidirectional
 * overrides and isolates that reorder the text after them on the host's screen.
 */
export const NOT_ONE_LINE = /[\p{Cc}\u2028\u2029\u202a-\u202e\u2066-\u2069]+/gu;

/** `name` on one line: each run of NOT_ONE_LINE made one space, the rest as it was. */
export function oneLine(name: string): string {
  return name.replace(NOT_ONE_LINE, " ");
}

/** Whether `text` holds nothing NOT_ONE_LINE names (`sessions.rename` refuses a title that does). */
export function isOneLine(text: string): boolean {
  return !ANY.test(text);
}

/** NOT_ONE_LINE without its global flag, whose `test` would keep a place between calls. */
const ANY = new RegExp(NOT_ONE_LINE.source, "u");
