import { readCapped } from "../util/capped-body.ts";
import { eachJsonArrayPiece, JsonElementTooLarge } from "../util/sliced-json-array.ts";
import { parseJsonObjectSliced } from "../util/sliced-json-object.ts";

/** The most all of a listing's pages together may bring (a real listing is far less). */
export const MAX_LISTING_BYTES = 64 * 1024 * 1024;

/** Why a page with one entry past util/sliced-json-array.ts's MAX_ELEMENT_BYTES is refused. */
export const TOO_LARGE_ENTRY = "the hub's file listing has an entry larger than 1 MiB";

/**
 * One page of the hub's file listing, read to at most `budget` bytes and handed to `each` a piece
 * of entries at a time (util/sliced-json-array.ts: one JSON.parse of a 64 MiB page held the
 * loop ~0.3 s, `ping` and `cancel` waiting). `bad` makes the error of a page that is too large,
 * not JSON or not a list; JSON.parse's own error is never shown (it quotes what it met, a token
 * a mirror echoed included). Returns the page's size in bytes.
 */
export async function readListingPage(
  res: Response,
  budget: number,
  each: (entries: unknown[]) => Promise<void>,
  bad: (why: string) => Error,
): Promise<number> {
  const tooLarge = `the hub's file listing is larger than ${MAX_LISTING_BYTES / 1024 / 1024} MiB`;
  const bytes = await cappedBody(res, budget, tooLarge, bad);
  let isList: boolean;
  try {
    isList = await eachJsonArrayPiece(bytes, each);
  } catch (err) {
    throw refusedJson(err, TOO_LARGE_ENTRY, bad);
  }
  if (!isList) throw bad("the hub's file listing is not a list");
  return bytes.byteLength;
}

/**
 * An answer of at most `max` bytes, parsed as JSON a piece at a time with `turn` between pieces
 * (util/sliced-json-object.ts: the revision's answer lists every file of the repo in `siblings`,
 * and one parse of 44 MiB held the loop 373 ms). `bad` makes the error of an answer too large,
 * not JSON, or with an entry past 1 MiB (`what` names it); JSON.parse's own error is never shown.
 * `keep`: the members the caller reads, the only ones kept (parseJsonObjectSliced).
 */
export async function readAnswerObject(
  res: Response,
  max: number,
  what: string,
  turn: () => Promise<void>,
  bad: (why: string) => Error,
  keep?: ReadonlySet<string>,
): Promise<unknown> {
  const bytes = await cappedBody(res, max, `${what} is larger than ${max / 1024 / 1024} MiB`, bad);
  try {
    return await parseJsonObjectSliced(bytes, turn, keep);
  } catch (err) {
    throw refusedJson(err, `${what} has an entry larger than 1 MiB`, bad);
  }
}

/** At most `max` bytes of the body: past them `bad(tooLarge)`, a body that breaks off not JSON. */
async function cappedBody(
  res: Response,
  max: number,
  tooLarge: string,
  bad: (why: string) => Error,
): Promise<Uint8Array> {
  let read: Awaited<ReturnType<typeof readCapped>>;
  try {
    read = await readCapped(res, max);
  } catch {
    throw bad("the hub's answer is not JSON");
  }
  if (read.over) throw bad(tooLarge);
  return read.bytes;
}

/** A parse's SyntaxError in the core's words (`tooLargeEntry` for an entry past the bound); others as they are. */
const refusedJson = (err: unknown, tooLargeEntry: string, bad: (why: string) => Error): unknown =>
  err instanceof SyntaxError
    ? bad(err instanceof JsonElementTooLarge ? tooLargeEntry : "the hub's answer is not JSON")
    : err;

/**
 * The URI reference of the link whose `rel` holds `next` in a `Link` header, as RFC 8288 §3
 * reads it: a URL is whatever stands between `<` and `>` (a cursor's comma included) and a
 * quoted parameter's text is text, so neither splits the header. `rel` is a space-separated list,
 * compared without case. A piece that is not a link is skipped to the next comma.
 */
export function nextLinkTarget(header: string): string | null {
  let at = 0;
  while (at < header.length) {
    const open = header.indexOf("<", at);
    if (open < 0) return null;
    const close = header.indexOf(">", open + 1);
    if (close < 0) return null;
    const params = readLinkParams(header, close + 1);
    const rel = params.rels.find(([name]) => name === "rel")?.[1] ?? "";
    if (rel.split(/[ \t]+/).some((r) => r.toLowerCase() === "next")) return header.slice(open + 1, close);
    at = params.end;
  }
  return null;
}

/** The `; name=value` parameters after a link's `>`, up to the comma that ends the link (or the header). */
function readLinkParams(header: string, from: number): { rels: [string, string][]; end: number } {
  const rels: [string, string][] = [];
  let at = from;
  let name = "";
  let value = "";
  let inName = true;
  const flush = () => {
    if (name.trim()) rels.push([name.trim().toLowerCase(), value.trim()]);
    name = "";
    value = "";
    inName = true;
  };
  while (at < header.length) {
    const c = header[at]!;
    if (c === ",") break;
    if (c === ";") flush();
    else if (c === "=" && inName) inName = false;
    else if (c === '"' && !inName) {
      // A quoted string, `\` escaping the next character (RFC 9110 §5.6.4).
      for (at++; at < header.length && header[at] !== '"'; at++) {
        if (header[at] === "\\") at++;
        value += header[at] ?? "";
      }
    } else if (inName) name += c;
    else value += c;
    at++;
  }
  flush();
  return { rels, end: at + 1 };
}
