/**
 * How many JSON values a server's line holds, and its top-level `id`, read in one pass without
 * parsing it: a line over LOOK_FROM_CHARS is parsed only when it holds at most MAX_VALUES values.
 * JSON.parse and the MCP SDK's schemas ran on the main loop for 0.5–1.6 s over an answer of
 * 645,000 empty parts or a million keys (a hostile review), where one 16 MB text took 39 ms: a
 * line's cost grows with its values, not its bytes (docs/agent.md "MCP tools").
 */

/** Lines shorter than this are parsed as they are (their values cost less than a look). */
export const LOOK_FROM_CHARS = 1024 * 1024;
/** Values a line over LOOK_FROM_CHARS may hold (objects, arrays and the items between commas). */
export const MAX_VALUES = 100_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export interface LineShape {
  /** Objects and arrays opened, and items after a comma: about the values the line holds. */
  values: number;
  /** The top-level `id` (a number or a string), when the line has one. */
  id?: number | string;
}

export function lineShape(text: string): LineShape {
  let values = 1;
  let depth = 0;
  let id: number | string | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      for (i++; i < text.length && text.charCodeAt(i) !== QUOTE; i++)
        if (text.charCodeAt(i) === BACKSLASH) i++;
      if (depth === 1 && text.slice(start, i + 1) === '"id"') id = idAfter(text, i + 1) ?? id;
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
      values++;
    } else if (c === 0x7d || c === 0x5d) depth--;
    else if (c === 0x2c) values++;
  }
  return id === undefined ? { values } : { values, id };
}

/** The value after a key that ends at `i` (`: 5`, `: "a"`), when it is a number or a short string. */
function idAfter(text: string, i: number): number | string | undefined {
  const m = /\s*:\s*(-?\d[\d.eE+-]*|"(?:[^"\\]|\\.){0,256}")/y;
  m.lastIndex = i;
  const token = m.exec(text)?.[1];
  if (token === undefined) return undefined;
  try {
    return JSON.parse(token) as number | string;
  } catch {
    return undefined;
  }
}
