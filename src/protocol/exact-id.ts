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

type Reviver = (this: object, key: string, value: unknown, context?: { source?: string }) => unknown;

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

/** Whether the line's number ids must be read again from its text (`exactIds`). */
export function needsExactIds(line: string, id: unknown, cancelTarget: unknown): boolean {
  if (mayBeInexact(id) || mayBeInexact(cancelTarget)) return true;
  return (typeof id === "number" || typeof cancelTarget === "number") && RESPELLED.test(line);
}

/**
 * A request's number ids as written: `id`, and cancel's `params.request_id`. The line is parsed
 * again with a reviver, which sees each value's source text; its holder tells the two apart.
 */
export function exactIds(line: string): { id?: RequestIdText; requestId?: RequestIdText } {
  const sources = new Map<object, Map<string, string>>();
  const reviver: Reviver = function (key, value, context) {
    if ((key === "id" || key === "request_id") && typeof value === "number" && context?.source) {
      const seen = sources.get(this) ?? new Map<string, string>();
      seen.set(key, context.source);
      sources.set(this, seen);
    }
    return value;
  };
  const root = JSON.parse(line, reviver as Parameters<typeof JSON.parse>[1]) as Record<string, unknown>;
  const params = root.params;
  return {
    id: exact(root.id, sources.get(root)?.get("id")),
    requestId:
      typeof params === "object" && params !== null
        ? exact((params as Record<string, unknown>).request_id, sources.get(params)?.get("request_id"))
        : undefined,
  };
}

/** A number id, or its text when the number lost digits of it. */
export type RequestIdText = number | ExactNumberId;

function exact(value: unknown, source: string | undefined): RequestIdText | undefined {
  if (typeof value !== "number" || source === undefined) return undefined;
  return JSON.stringify(value) === source ? value : json.rawJSON(source);
}

/**
 * Where the active table keeps an exact id: an integer by its digits (`BigInt` reads them all),
 * so two ids a double cannot tell apart stay two; any other number by its value, like `1.5`.
 */
export function exactKey(id: ExactNumberId): { digits: string } | { value: number } {
  return /^-?\d+$/.test(id.rawJSON)
    ? { digits: BigInt(id.rawJSON).toString() }
    : { value: Number(id.rawJSON) };
}
