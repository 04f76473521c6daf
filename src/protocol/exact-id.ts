import { quotedEnd } from "../util/quoted.ts";

/**
 * Number ids a double cannot hold (docs/protocol.md, ids): JSON.parse turns
 * `18446744073709551616` into 18446744073709552000, so such an id is kept as the text the host
 * sent and written back verbatim (`JSON.rawJSON`); so is one spelled otherwise than a double
 * prints (`1.0`). Ordinary ids never reach the exact reading.
 */

/** A number id kept as its JSON text; JSON.stringify writes `rawJSON` as it is. */
export interface ExactNumberId {
  readonly rawJSON: string;
}

const json = JSON as typeof JSON & { rawJSON(text: string): ExactNumberId };

/** Whether a parsed number may differ from its text: only safe integers are surely exact. */
export function mayBeInexact(value: unknown): value is number {
  return typeof value === "number" && !Number.isSafeInteger(value);
}

/**
 * An id or request_id written as a number JSON.stringify would not write (`1.0`, `1e2`, `-0`,
 * `-1e-400`): its value is a safe integer, yet echoing the value would change the text a strict
 * host compares. A cheap look at the line; a false alarm (a nested `"id": 1.5`) costs only the
 * exact reading.
 */
const RESPELLED = /"(?:request_)?id"\s*:\s*(?:-?\d*[.eE]|-0(?![\d.eE]))/;

/**
 * A key spelled with an escape (`"\u0069d"` is `"id"`), which RESPELLED cannot see: the line is
 * read exactly (a false alarm costs one pass). Bounded repeats: linear over the line.
 */
const ESCAPED_KEY = /"[^"\\]{0,24}\\u[0-9a-fA-F]{4}[^"]{0,48}"\s*:/;

/** Whether the line's number ids must be read again from its text (`exactIds`). */
export function needsExactIds(line: string, id: unknown, cancelTarget: unknown): boolean {
  if (mayBeInexact(id) || mayBeInexact(cancelTarget)) return true;
  if (typeof id !== "number" && typeof cancelTarget !== "number") return false;
  return RESPELLED.test(line) || ESCAPED_KEY.test(line);
}

/**
 * A request's number ids as written: `id`, and cancel's `params.request_id`, from the parsed
 * line's values and their source text (`numberSources`).
 */
export function exactIds(
  line: string,
  parsed: Record<string, unknown>,
): { id?: RequestIdText; requestId?: RequestIdText } {
  const sources = numberSources(line);
  const params = parsed.params;
  return {
    id: exact(parsed.id, sources.id),
    requestId:
      typeof params === "object" && params !== null
        ? exact((params as Record<string, unknown>).request_id, sources.requestId)
        : undefined,
  };
}

/** A JSON number's token, read where it starts (sticky). */
const NUMBER = /-?\d[\d.eE+-]*/y;
const QUOTE = 0x22;
const COLON = 0x3a;
const OPEN_OBJECT = 0x7b;
const OPEN_ARRAY = 0x5b;
const CLOSE_OBJECT = 0x7d;
const CLOSE_ARRAY = 0x5d;

/**
 * The source text of the top-level `id` and of `params.request_id` when they are numbers, read
 * from a line JSON.parse took (so well formed), in one pass with a depth counter: no recursion,
 * whatever the nesting (a reviver's parse recursed and threw at ~5,000 levels, which ended the
 * read loop; docs/protocol.md, ids). As JSON.parse, the last of a repeated key counts.
 */
export function numberSources(line: string): { id?: string; requestId?: string } {
  const out: { id?: string; requestId?: string } = {};
  let depth = 0;
  /** The depth of the top-level `params` object while inside it, else -1. */
  let paramsDepth = -1;
  let paramsNext = false;
  for (let i = 0; i < line.length; ) {
    const c = line.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      i = quotedEnd(line, i) + 1;
      const colon = skipSpace(line, i);
      const keyed = line.charCodeAt(colon) === COLON && (depth === 1 || depth === paramsDepth);
      if (!keyed) continue;
      const key = JSON.parse(line.slice(start, i)) as string;
      const value = skipSpace(line, colon + 1);
      if (depth === 1 && key === "id") out.id = numberAt(line, value);
      else if (depth === 1 && key === "params") {
        out.requestId = undefined;
        paramsNext = line.charCodeAt(value) === OPEN_OBJECT;
      } else if (depth === paramsDepth && key === "request_id") out.requestId = numberAt(line, value);
      i = value;
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      depth++;
      if (paramsNext) paramsDepth = depth;
      paramsNext = false;
      i++;
    } else {
      if ((c === CLOSE_OBJECT || c === CLOSE_ARRAY) && depth-- === paramsDepth) paramsDepth = -1;
      i++;
    }
  }
  return out;
}

function skipSpace(line: string, i: number): number {
  while (i < line.length && " \t\n\r".includes(line.charAt(i))) i++;
  return i;
}

/** The number token at `i`, or undefined when the value there is not a number. */
function numberAt(line: string, i: number): string | undefined {
  NUMBER.lastIndex = i;
  return NUMBER.exec(line)?.[0];
}

/** A number id, or its text when the number lost digits of it. */
export type RequestIdText = number | ExactNumberId;

function exact(value: unknown, source: string | undefined): RequestIdText | undefined {
  if (typeof value !== "number" || source === undefined) return undefined;
  return JSON.stringify(value) === source ? value : json.rawJSON(source);
}

/**
 * Where the active table keeps a number id: an integer a double cannot hold by its exact digits,
 * however it is spelled (`9007199254740993`, `9007199254740993.0`, `9.007199254740993e15`: one
 * id, not 2^53's, which a double reads them all as); any other number by its value, like `1.5`
 * and `-0` (kept by its digits, `-0` was a second id 0). A plain number is its JSON text.
 */
export function exactKey(id: number | ExactNumberId): { digits: string } | { value: number } {
  const value = typeof id === "number" ? id : Number(id.rawJSON);
  if (Number.isSafeInteger(value)) return { value };
  const digits = integerDigits(typeof id === "number" ? JSON.stringify(id) : id.rawJSON);
  return digits === undefined ? { value } : { digits };
}

const NUMBER_PARTS = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

/**
 * The integer a finite JSON number's text denotes, as BigInt prints it; undefined when it has a
 * fraction. Bounded: a finite value has at most 309 digits before its point.
 */
function integerDigits(text: string): string | undefined {
  const m = NUMBER_PARTS.exec(text);
  if (!m) return undefined;
  const [, sign, whole = "", fraction = "", exp = "0"] = m;
  let digits = (whole + fraction).replace(/^0+/, "");
  let shift = Number(exp) - fraction.length;
  const zeros = digits.length - digits.replace(/0+$/, "").length;
  digits = digits.slice(0, digits.length - zeros);
  shift += zeros;
  if (digits === "") return "0";
  if (shift < 0 || digits.length + shift > 400) return undefined;
  return BigInt(`${sign}${digits}${"0".repeat(shift)}`).toString();
}
