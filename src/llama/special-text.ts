import { escapeRegExp } from "../util/escape-regexp.ts";
import { quotedEnd } from "../util/quoted.ts";

/**
 * llama-server (b10587) tokenizes a chat's rendered prompt with special tokens parsed, message
 * contents included, and takes no per-request switch for it: text that spells one of the model's
 * markers (`<|im_end|>`, `<|im_start|>system`) in a document's passage, a tool result or the input
 * reaches the model as that token, a real end of turn and a real system turn (docs/agent.md,
 * "Special-token text"). The markers are read off the chat template and the BOS/EOS that /props
 * gives; in what the core sends, each gets a zero-width space after its first character, so it
 * is tokenized as the text it is. Pure: the turn applies it to the request, never to the store.
 */

/** Inserted after a marker's first character: invisible, and no vocabulary has it inside a marker. */
export const BREAK = "\u200b";

/** The longest marker looked for: templates' markers are short; a long "tag" is prose. */
const MAX_MARKER = 48;
/** What a marker looks like inside a template's string literals. */
const MARKER =
  /<\|[^|<>\s]{1,44}\|>|<｜[^｜<>\s]{1,44}｜>|\[\/?[A-Z][A-Z0-9_]{1,40}\]|<\/?[A-Za-z][A-Za-z0-9_:.-]{0,40}>/g;
/** The markers a chat template writes (found in its string literals), with the BOS and EOS. */
export function templateMarkers(template: string | null, ...tokens: (string | null | undefined)[]): string[] {
  const found = new Set<string>();
  for (const literal of literalsOf(template ?? "")) for (const m of literal.match(MARKER) ?? []) found.add(m);
  for (const t of tokens) if (t && t.length >= 2 && t.length <= MAX_MARKER && !/\s/.test(t)) found.add(t);
  return [...found].sort((a, b) => b.length - a.length);
}

/**
 * A Jinja template's string literals, single- or double-quoted, with their escapes, in one pass:
 * a quote with no end makes every later quote of its kind no start either (a regex tried each
 * from the start: quadratic on a GGUF's template of escaped quotes, 0.25 s for 20 KB; a hostile
 * review). A template's literals all end, so it finds what the regex found.
 */
export function* literalsOf(template: string): Generator<string> {
  let unended = "";
  for (let i = 0; i < template.length; i++) {
    const quote = template[i] as string;
    if ((quote !== "'" && quote !== '"') || unended.includes(quote)) continue;
    const end = quotedEnd(template, i, quote.charCodeAt(0));
    if (end >= template.length) {
      unended += quote;
      continue;
    }
    yield template.slice(i, end + 1);
    i = end;
  }
}

/** A neutraliser for these markers; identity when there are none. */
export function markerBreaker(markers: readonly string[]): (text: string) => string {
  if (markers.length === 0) return (text) => text;
  const pattern = new RegExp(markers.map(escapeRegExp).join("|"), "g");
  const firsts = new Set(markers.map((m) => m[0]));
  return (text) => {
    // Most text has none of the markers' first characters: no regex run at all.
    let any = false;
    for (const c of firsts) if (text.includes(c as string)) any = true;
    return any ? text.replace(pattern, (m) => `${m.slice(0, 1)}${BREAK}${m.slice(1)}`) : text;
  };
}

/**
 * Every string inside a JSON value broken the same way (a `tools` array: names, descriptions),
 * keys too: a tool's input schema names its properties, and the template renders them.
 */
export function breakDeep(value: unknown, breakText: (text: string) => string): unknown {
  if (typeof value === "string") return breakText(value);
  if (Array.isArray(value)) return value.map((v) => breakDeep(v, breakText));
  if (value !== null && typeof value === "object")
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [breakText(k), breakDeep(v, breakText)]));
  return value;
}
