import { quotedEnd } from "./quoted.ts";

/**
 * How many JSON values a text holds, and its top-level `id`, read in one pass without parsing
 * it. A long line or event is parsed only when it holds at most a bound of values: JSON.parse
 * (and a schema over the result) costs with the values, not the bytes: an MCP answer of 645,000
 * empty parts held the main loop 0.5 s, a million keys 1.6 s, an 8 MiB llama-server event of
 * 700,000 keys 0.47 s, where one 16 MB string took 39 ms (a hostile review).
 */

/** Texts shorter than this are parsed as they are (their values cost less than a look). */
export const LOOK_FROM_CHARS = 1024 * 1024;
/**
 * An MCP server's lines longer than this are counted first (agent/mcp/child-transport.ts): one of
 * 1 MiB holds over 100,000 keys, which its parse and the SDK's schemas took 300 ms over.
 */
export const MCP_LOOK_FROM_CHARS = 64 * 1024;
/** Values an MCP server's line over MCP_LOOK_FROM_CHARS may hold (agent/mcp/child-transport.ts). */
export const MAX_VALUES = 100_000;
/**
 * Values an MCP server's line over MCP_LOOK_FROM_CHARS may hold in its top two levels (the message
 * and its result, params or error): the SDK's schemas copy each key there (loose objects), the
 * tools/call one again, at about 2 µs a key, where a value deeper in costs only its parse.
 */
export const MAX_SHALLOW_VALUES = 1_000;

const QUOTE = 0x22;

export interface JsonShape {
  /** Objects and arrays opened, and items after a comma: about the values the line holds. */
  values: number;
  /** Those of them in the top two levels: the message's and its result's (or params', or error's). */
  shallow: number;
  /** The top-level `id` (a number or a string), when the line has one; of several, the last, as JSON.parse reads. */
  id?: number | string;
  /** The id is a number spelled otherwise than JSON.stringify writes it back (`1e2`, `1.0`, `-0`, 2^64). */
  respelled?: true;
  /** A top-level `method` key: a request or a notification, not an answer. */
  method?: true;
}

export function jsonShape(text: string): JsonShape {
  let values = 1;
  let shallow = 0;
  let depth = 0;
  let id: number | string | undefined;
  let method = false;
  let respelled = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      i = quotedEnd(text, i);
      if (depth !== 1) continue;
      const length = i + 1 - start;
      if (length === 4 && text.startsWith('"id"', start)) {
        const token = idAfter(text, i + 1);
        id = token?.value;
        respelled = typeof id === "number" && String(id) !== token?.text;
      } else if (length === 8 && text.startsWith('"method"', start) && keyAt(text, i + 1)) method = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (depth === 1 || depth === 2) shallow++;
      depth++;
      values++;
    } else if (c === 0x7d || c === 0x5d) depth--;
    else if (c === 0x2c) {
      values++;
      if (depth === 1 || depth === 2) shallow++;
    }
  }
  return {
    values,
    shallow,
    ...(id === undefined ? {} : { id }),
    ...(method ? { method: true as const } : {}),
    ...(respelled ? { respelled: true as const } : {}),
  };
}

const COLON_AHEAD = /\s*:/y;
/** A key's value when it is a number or a short string (sticky). */
const ID_AHEAD = /\s*:\s*(-?\d[\d.eE+-]*|"(?:[^"\\]|\\.){0,256}")/y;

/** Whether the string that ends at `i` is a key (a colon follows it). */
function keyAt(text: string, i: number): boolean {
  COLON_AHEAD.lastIndex = i;
  return COLON_AHEAD.test(text);
}

/** The value after a key that ends at `i` (`: 5`, `: "a"`) and its text, when it is a number or a short string. */
function idAfter(text: string, i: number): { value: number | string; text: string } | undefined {
  ID_AHEAD.lastIndex = i;
  const token = ID_AHEAD.exec(text)?.[1];
  if (token === undefined) return undefined;
  try {
    return { value: JSON.parse(token) as number | string, text: token };
  } catch {
    return undefined;
  }
}
