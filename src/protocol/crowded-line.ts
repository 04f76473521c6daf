import { jsonShape } from "../util/json-shape.ts";
import type { RequestId } from "./messages.ts";
import { MAX_SCHEMA_CHARS } from "./schema-problem.ts";

/** A host's lines longer than this are counted before their parse (util/json-shape.ts, one pass). */
export const HOST_LOOK_FROM_CHARS = 64 * 1024;

/**
 * Values a host's line over HOST_LOOK_FROM_CHARS may hold. JSON.parse costs with the values, not
 * the bytes: a 7.7 MiB line of 900,000 keys, under the 8 MiB `stdio.max_line_bytes`, held the main
 * loop 1.4-1.8 s on a 2-core machine, and a ping or cancel sent after it waited (a hostile review).
 * The most a request may rightly hold is a `response_format` schema at its limit, one value in
 * each two characters (`0,`), beside 2,048 embed inputs or 64 images: 20,000 refused an enum of
 * 25,000 codes the schema's own limits take. 135,168 keys cost ~100 ms on a 2-core machine.
 */
export const MAX_HOST_VALUES = MAX_SCHEMA_CHARS / 2 + 4096;

/** JSON's white space, then an object's or an array's opening (sticky: read from the start). */
const OPENS_CONTAINER = /[ \t\n\r]*[[{]/y;

/** Why a host's line is refused unparsed, and the id it seems to carry; undefined: parse it. */
export function crowdedLine(text: string): { id: RequestId | null; message: string } | undefined {
  if (text.length <= HOST_LOOK_FROM_CHARS) return undefined;
  // Anything but an object or an array fails its parse at once or is one value: \`invalid_json\`.
  OPENS_CONTAINER.lastIndex = 0;
  if (!OPENS_CONTAINER.test(text)) return undefined;
  const shape = jsonShape(text);
  if (shape.values <= MAX_HOST_VALUES) return undefined;
  const message = `the request holds about ${shape.values} JSON values; at most ${MAX_HOST_VALUES} are read in a line over ${HOST_LOOK_FROM_CHARS} characters`;
  // A number id spelled otherwise than its value prints (`1e2`, `-0`, 2^64 that lost digits) is
  // echoed as written on the parsed path (protocol/exact-id.ts): its value would name another
  // request of the host's (100 for `1e2`), so null.
  const id = shape.respelled ? null : (shape.id ?? null);
  return { id, message };
}
