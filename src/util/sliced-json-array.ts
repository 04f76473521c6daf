/**
 * A JSON array of up to tens of MiB (a hub's file listing page) parsed a piece at a time, the
 * loop given back between pieces: one JSON.parse of a 64 MiB page held the loop ~0.3 s on the
 * bench box (docs/models.md), and `ping` and `cancel` waited for it. The bytes are cut at the
 * array's own commas (outside strings, between elements) about every PIECE_BYTES; each piece is
 * parsed strictly by JSON.parse as `[piece]`, so what is accepted is exactly what one parse of
 * the whole would accept. Throws SyntaxError when the bytes are not JSON.
 */

/** Bytes parsed in one stretch of the loop: a few ms. */
export const PIECE_BYTES = 256 * 1024;

/**
 * The most one element may span. A piece ends only between elements, so one element of 64 MiB
 * was one piece: ~2 s of cutting and parsing in one turn. A hub listing's entry is well under
 * a KiB; one larger than this is refused.
 */
export const MAX_ELEMENT_BYTES = 1024 * 1024;

/** An element of the array spans more than MAX_ELEMENT_BYTES (a SyntaxError: the page is refused). */
export class JsonElementTooLarge extends SyntaxError {
  constructor() {
    super(`an element of the JSON array is larger than ${MAX_ELEMENT_BYTES / 1024 / 1024} MiB`);
    this.name = "JsonElementTooLarge";
  }
}

/**
 * Hands the array's elements to `each` a piece at a time, in order (the loop is given back in
 * `each`, which may also vet a piece and keep only what it needs: a hostile page is refused at
 * its first bad piece, not after all of it is parsed). False when the bytes hold some other
 * JSON value (then parsed whole only when small: a big body that is not a list is refused).
 */
export async function eachJsonArrayPiece(
  bytes: Uint8Array,
  each: (elements: unknown[]) => Promise<void>,
): Promise<boolean> {
  const i = skipSpace(bytes, hasBom(bytes) ? 3 : 0);
  if (bytes[i] !== BYTE.openSquare) {
    if (bytes.length > PIECE_BYTES) throw new SyntaxError("a large answer that is not a JSON array");
    JSON.parse(decode(bytes, hasBom(bytes) ? 3 : 0, bytes.length));
    return false;
  }
  await eachArrayPieceAt(bytes, i, each, (after) => {
    if (skipSpace(bytes, after) !== bytes.length) throw new SyntaxError("text after the JSON array");
  });
  return true;
}

/**
 * The elements of the array whose `[` is at `open`, handed to `each` a piece at a time; returns
 * the index just past the array's `]`. `atEnd` may refuse what follows the array before its
 * last piece is handed on.
 */
export async function eachArrayPieceAt(
  bytes: Uint8Array,
  open: number,
  each: (elements: unknown[]) => Promise<void>,
  atEnd?: (after: number) => void,
): Promise<number> {
  let count = 0;
  let start = open + 1;
  for (;;) {
    const at = nextCut(bytes, start);
    if (at === bytes.length) throw new SyntaxError("the JSON array does not end");
    if (bytes[at] === BYTE.closeCurly) throw new SyntaxError("a } that closes nothing");
    const last = bytes[at] === BYTE.closeSquare;
    const elements = parsePiece(bytes, start, at, !last || count > 0);
    count += elements.length;
    if (last) atEnd?.(at + 1);
    await each(elements);
    if (last) return at + 1;
    start = at + 1;
  }
}

/**
 * The first comma between the array's elements at least PIECE_BYTES past `start`, or the `]`
 * that closes the array, or the end; a plain function, so the engine compiles its loop. Throws
 * JsonElementTooLarge when an element spans more than MAX_ELEMENT_BYTES.
 */
function nextCut(bytes: Uint8Array, start: number): number {
  let depth = 0;
  let element = start;
  for (let i = start; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === BYTE.quote) i = stringEnd(bytes, i);
    else if (b === BYTE.openSquare || b === BYTE.openCurly) depth++;
    else if (b === BYTE.closeSquare || b === BYTE.closeCurly) {
      if (depth === 0) return i;
      depth--;
    } else if (depth === 0 && b === BYTE.comma) {
      if (i - start >= PIECE_BYTES) return i;
      element = i;
    }
    if (i - element > MAX_ELEMENT_BYTES) throw new JsonElementTooLarge();
  }
  return bytes.length;
}

/** `[start, end)` as elements; none where some must be is `[1,,2]` or `[1,]`, not `[]`. */
function parsePiece(bytes: Uint8Array, start: number, end: number, mustHave: boolean): unknown[] {
  const elements = JSON.parse(`[${decode(bytes, start, end)}]`) as unknown[];
  if (elements.length === 0 && mustHave) throw new SyntaxError("an empty element in a JSON array");
  return elements;
}

/** The index of the quote that ends the string opened at `open` (its escaped quotes skipped), or the end. */
export function stringEnd(bytes: Uint8Array, open: number): number {
  for (let q = bytes.indexOf(BYTE.quote, open + 1); q >= 0; q = bytes.indexOf(BYTE.quote, q + 1)) {
    let slashes = 0;
    while (bytes[q - 1 - slashes] === BYTE.backslash) slashes++;
    if (slashes % 2 === 0) return q;
  }
  return bytes.length;
}

export function skipSpace(bytes: Uint8Array, i: number): number {
  let at = i;
  while (at < bytes.length && SPACE.has(bytes[at] as number)) at++;
  return at;
}

export const hasBom = (b: Uint8Array) => b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
/**
 * UTF-8 text of `[start, end)`, a BOM there kept: a piece starting with one (`[\uFEFF1]`) was
 * read with it dropped and accepted, where one parse of the whole refuses it. The body's own
 * BOM is skipped by the callers (`hasBom`), as a whole decode drops it.
 */
export const decode = (b: Uint8Array, start: number, end: number) =>
  new TextDecoder("utf-8", { ignoreBOM: true }).decode(b.subarray(start, end));

/** The bytes the cutting reads, as ASCII. */
export const BYTE = {
  quote: 0x22,
  backslash: 0x5c,
  comma: 0x2c,
  colon: 0x3a,
  openSquare: 0x5b,
  closeSquare: 0x5d,
  openCurly: 0x7b,
  closeCurly: 0x7d,
} as const;
/** JSON's whitespace: space, tab, LF, CR. */
const SPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
