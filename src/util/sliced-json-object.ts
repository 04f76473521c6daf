import {
  BYTE,
  decode,
  eachArrayPieceAt,
  hasBom,
  JsonElementTooLarge,
  MAX_ELEMENT_BYTES,
  PIECE_BYTES,
  skipSpace,
  stringEnd,
} from "./sliced-json-array.ts";

/**
 * A JSON object of up to tens of MiB (the hub's answer for a revision, whose `siblings` lists
 * every file of the repo) parsed a piece at a time, the loop given back through `turn` between
 * pieces: one JSON.parse of a 44 MiB answer held the loop 373 ms (docs/models.md), `ping` and
 * `cancel` waiting. Its members are cut at the object's own commas into runs of about
 * PIECE_BYTES, each parsed by JSON.parse as `{run}`; a member whose array value is larger than a
 * piece is read as the hub listing's pages are (util/sliced-json-array.ts: its elements a piece
 * at a time, none past MAX_ELEMENT_BYTES), and any other member may span at most
 * MAX_ELEMENT_BYTES. What is accepted and what comes out are those of one parse of the whole (a
 * repeated key: the last value, at the first one's place). Another JSON value is parsed whole
 * when small, refused when large. Throws SyntaxError (JsonElementTooLarge for a member or
 * element too large). `keep`: only those members are kept (all are still parsed and checked): an
 * answer of millions of tiny distinct keys grew one object past a rehash that held the loop
 * ~235 ms in one member's merge, where the caller reads one or two.
 */
export async function parseJsonObjectSliced(
  bytes: Uint8Array,
  turn: () => Promise<void>,
  keep?: ReadonlySet<string>,
): Promise<unknown> {
  const open = skipSpace(bytes, hasBom(bytes) ? 3 : 0);
  if (bytes[open] !== BYTE.openCurly) {
    if (bytes.length > PIECE_BYTES) throw new SyntaxError("a large answer that is not a JSON object");
    return JSON.parse(decode(bytes, hasBom(bytes) ? 3 : 0, bytes.length));
  }
  const object: Record<string, unknown> = {};
  let start = open + 1;
  let afterComma = false;
  for (;;) {
    const cut = nextRunCut(bytes, start);
    if (cut.end >= start) {
      const run = JSON.parse(`{${decode(bytes, start, cut.end)}}`) as Record<string, unknown>;
      const keys = Object.keys(run);
      // Nothing where a member must be (`{,`, `{"a":1,}`); only `{}` has none.
      if (keys.length === 0 && (afterComma || bytes[cut.at] !== BYTE.closeCurly))
        throw new SyntaxError("an empty member in a JSON object");
      for (const key of keys) if (!keep || keep.has(key)) define(object, key, run[key]);
    }
    let at = cut.at;
    if (cut.bigArray) {
      const { key, valueAt } = memberKey(bytes, skipSpace(bytes, cut.end + 1));
      // The `[` found may follow another value (`"a":1 [...], 2]`): read from that value's
      // first byte as an array, the rest was taken as its elements.
      if (bytes[valueAt] !== BYTE.openSquare) throw new SyntaxError("a JSON value where an array starts");
      // One not kept (the revision's `siblings`, tens of MiB) is parsed and checked, not gathered.
      const kept = !keep || keep.has(key);
      const elements: unknown[] = [];
      const after = await eachArrayPieceAt(bytes, valueAt, async (piece) => {
        if (kept) for (const element of piece) elements.push(element);
        await turn();
      });
      if (kept) define(object, key, elements);
      at = skipSpace(bytes, after);
      if (bytes[at] !== BYTE.comma && bytes[at] !== BYTE.closeCurly)
        throw new SyntaxError("no comma after a member");
    }
    if (bytes[at] === BYTE.closeCurly) {
      if (skipSpace(bytes, at + 1) !== bytes.length) throw new SyntaxError("text after the JSON object");
      return object;
    }
    await turn();
    start = at + 1;
    afterComma = true;
  }
}

/**
 * Where the run of members from `start` ends: `at` is the comma (past PIECE_BYTES) or the `}`
 * that ends it. When a member's array value grows past a piece, the run ends before that member
 * (`end`: the comma before it, or `start - 1` when it is the run's first) and `bigArray` says
 * the member is to be read a piece at a time. A plain function, so the engine compiles its loop.
 */
function nextRunCut(bytes: Uint8Array, start: number): { end: number; at: number; bigArray: boolean } {
  let depth = 0;
  let member = start - 1;
  let array = -1;
  for (let i = start; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === BYTE.quote) i = stringEnd(bytes, i);
    else if (b === BYTE.openSquare || b === BYTE.openCurly) {
      if (depth === 0 && b === BYTE.openSquare) array = i;
      depth++;
    } else if (b === BYTE.closeSquare || b === BYTE.closeCurly) {
      if (depth === 0) {
        if (b === BYTE.closeSquare) throw new SyntaxError("a ] that closes nothing");
        return { end: i, at: i, bigArray: false };
      }
      depth--;
      if (depth === 0) array = -1;
    } else if (depth === 0 && b === BYTE.comma) {
      if (i - start >= PIECE_BYTES) return { end: i, at: i, bigArray: false };
      member = i;
    }
    if (array >= 0 && i - array > PIECE_BYTES) return { end: member, at: member, bigArray: true };
    if (i - member > MAX_ELEMENT_BYTES) throw new JsonElementTooLarge();
  }
  throw new SyntaxError("the JSON object does not end");
}

/** The key of the member starting at `at` and where its value starts (past the `:`). */
function memberKey(bytes: Uint8Array, at: number): { key: string; valueAt: number } {
  if (bytes[at] !== BYTE.quote) throw new SyntaxError("a JSON object's member without a key");
  const close = stringEnd(bytes, at);
  if (close === bytes.length) throw new SyntaxError("a JSON string that does not end");
  const key = JSON.parse(decode(bytes, at, close + 1)) as string;
  const colon = skipSpace(bytes, close + 1);
  if (bytes[colon] !== BYTE.colon) throw new SyntaxError("a JSON object's key without a colon");
  return { key, valueAt: skipSpace(bytes, colon + 1) };
}

/** Defined, not assigned: a `__proto__` key is an own member for JSON.parse, not the prototype. */
const define = (object: Record<string, unknown>, key: string, value: unknown) =>
  Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
