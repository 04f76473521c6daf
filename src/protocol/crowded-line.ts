import { jsonShape } from "../util/json-shape.ts";
import type { RequestId } from "./messages.ts";

/** A host's lines longer than this are counted before their parse (util/json-shape.ts, one pass). */
export const HOST_LOOK_FROM_CHARS = 64 * 1024;

/**
 * Values a host's line over HOST_LOOK_FROM_CHARS may hold. JSON.parse costs with the values, not
 * the bytes: a 7.7 MiB line of 900,000 keys, under the 8 MiB `stdio.max_line_bytes`, held the main
 * loop 1.4-1.8 s on a 2-core machine, and a ping or cancel sent after it waited (a hostile review);
 * 20,000 cost some 30 ms. A request's input, images and schema are far fewer.
 */
export const MAX_HOST_VALUES = 20_000;

/** Why a host's line is refused unparsed, and the id it seems to carry; undefined: parse it. */
export function crowdedLine(text: string): { id: RequestId | null; message: string } | undefined {
  if (text.length <= HOST_LOOK_FROM_CHARS) return undefined;
  const shape = jsonShape(text);
  if (shape.values <= MAX_HOST_VALUES) return undefined;
  const message = `the request holds about ${shape.values} JSON values; at most ${MAX_HOST_VALUES} are read in a line over ${HOST_LOOK_FROM_CHARS} characters`;
  // A number id read without the parse may have lost digits: not echoed as if it were the host's.
  const id = typeof shape.id === "number" && !Number.isSafeInteger(shape.id) ? null : (shape.id ?? null);
  return { id, message };
}
