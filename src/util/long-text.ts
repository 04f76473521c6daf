/**
 * A long JSON string value kept in pieces that JSON writes as they are, so the answer that
 * carries it is written a piece at a time and never made one string: a 20 MB image's
 * `sessions.attachment` answer (27 Mi characters) joined, stringified and written whole held the
 * main loop 100-200 ms on a 2-core machine (docs/protocol.md#images). A piece JSON would escape
 * (a quote, a backslash, a control, a lone surrogate) is kept escaped as JSON.stringify writes it:
 * base64 needs none, but nothing else held a caller to base64, and one raw broke the answer line.
 * Stringified by anything but the writer's `jsonLine`, it is the joined text.
 */
export class LongText {
  /** The pieces as JSON writes them inside the string's quotes. */
  private readonly written: string[] = [];
  /** The pieces as given: the same strings where none needed escaping. */
  private readonly given: string[] = [];

  constructor(pieces: readonly string[] = []) {
    for (const piece of pieces) this.add(piece);
  }

  /** Pieces as the line carries them, each JSON-escaped where it needs it. */
  get pieces(): readonly string[] {
    return this.written;
  }

  /**
   * One more piece, checked (and escaped) alone: a caller adding a piece a turn of the loop
   * (store/attachment-of.ts) never scans the whole text in one.
   */
  add(piece: string): void {
    this.given.push(piece);
    this.written.push(NEEDS_ESCAPE.test(piece) ? JSON.stringify(piece).slice(1, -1) : piece);
  }

  toJSON(): string {
    if (!found) return this.given.join("");
    found.push(this);
    return `\u0000${NONCE}:${found.length - 1}`;
  }

  /** Its text where one is put into a string (a log, a template): it stands for a string. */
  toString(): string {
    return this.given.join("");
  }
}

/** What JSON.stringify writes escaped in a string: the quote, the backslash, C0, lone surrogates (a pair cut in two is two). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** The LongTexts of the value `jsonLine` is stringifying (JSON.stringify runs to its end: one at a time). */
let found: LongText[] | undefined;

/** No text of a message can hold it: JSON writes a NUL as `\u0000`, the marker holds that escape. */
const NONCE = crypto.randomUUID();
const MARK = new RegExp(`"\\\\u0000${NONCE}:(\\d+)"`, "g");

/**
 * `value`'s JSON and a newline: one string, or the text around each LongText with its pieces in
 * its place (their quotes in the text), in order.
 */
export function jsonLine(value: unknown): string | string[] {
  found = [];
  const texts = found;
  let text: string;
  try {
    text = `${JSON.stringify(value)}\n`;
  } finally {
    found = undefined;
  }
  if (texts.length === 0) return text;
  const out: string[] = [];
  let at = 0;
  for (const m of text.matchAll(MARK)) {
    out.push(`${text.slice(at, m.index)}"`, ...(texts[Number(m[1])] as LongText).pieces);
    at = m.index + m[0].length - 1;
  }
  out.push(text.slice(at));
  return out;
}
