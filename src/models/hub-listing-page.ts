import { readCapped } from "../util/capped-body.ts";
import { eachJsonArrayPiece, JsonElementTooLarge } from "../util/sliced-json-array.ts";

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
  let read: Awaited<ReturnType<typeof readCapped>>;
  try {
    read = await readCapped(res, budget);
  } catch {
    throw bad("the hub's answer is not JSON");
  }
  if (read.over) throw bad(`the hub's file listing is larger than ${MAX_LISTING_BYTES / 1024 / 1024} MiB`);
  let isList: boolean;
  try {
    isList = await eachJsonArrayPiece(read.bytes, each);
  } catch (err) {
    if (!(err instanceof SyntaxError)) throw err;
    throw bad(err instanceof JsonElementTooLarge ? TOO_LARGE_ENTRY : "the hub's answer is not JSON");
  }
  if (!isList) throw bad("the hub's file listing is not a list");
  return read.bytes.byteLength;
}
