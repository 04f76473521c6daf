import { BY_ID_ONLY } from "../protocol/by-id-only.ts";
import { OVERSIZE_HEAD_BYTES } from "../protocol/transport/framing.ts";
import { callError, type LocalAiError } from "./errors.ts";
import { thrownText } from "./host-callbacks.ts";

/**
 * Small readers and writers of protocol lines for the connection (connection.ts): the request
 * line itself, a line of the core's read as a message and the id it carries, and a line clipped
 * for a log message.
 */

/** A line of the core's stdout, read: a message for request `key`, an error for none, or neither. */
export type ReadLine =
  | { kind: "message"; key: string; msg: Record<string, unknown> }
  | { kind: "no_request"; msg: Record<string, unknown> }
  /** `key`: the request a line that is no message names (its answer, lost). */
  | { kind: "malformed"; detail: string; key?: string | undefined };

/** A line of core `from`'s (any core, when not given), read: `calls` are the pending ones. */
export function readLine(line: string, calls?: Calls, from?: unknown): ReadLine {
  let msg: unknown;
  try {
    msg = JSON.parse(line);
  } catch {
    // Its start alone: on a line of megabytes whose id never closes, Node's regexp overflowed its stack.
    const key = lineKey(line.slice(0, OVERSIZE_HEAD_BYTES), calls, from);
    return { kind: "malformed", detail: `not JSON: ${clip(line)}`, key };
  }
  const key =
    isObject(msg) && (typeof msg.id === "string" || typeof msg.id === "number") ? String(msg.id) : undefined;
  // One naming a call (a JSON-RPC answer: a wrong binary) is no answer to it, nor will one come.
  if (!isObject(msg) || typeof msg.type !== "string")
    return {
      kind: "malformed",
      detail: `not a protocol message: ${clip(line)}`,
      key: key ?? handshakeOf(calls, from),
    };
  if (msg.type === "error" && msg.id === null) return { kind: "no_request", msg };
  if (key === undefined)
    return {
      kind: "malformed",
      detail: `message without a usable id: ${clip(line)}`,
      key: handshakeOf(calls, from),
    };
  return { kind: "message", key, msg };
}

type Calls = ReadonlyMap<string, { method: string; sentTo: unknown }>;

/**
 * Lines that are no protocol message a core may write before its answer to initialize, skipped:
 * a launcher script's banner before it execs the core (`echo starting; exec local-ai "$@"`).
 */
export const HANDSHAKE_STRAY_LINES = 16;

/** Stray lines seen so far, per initialize call (its entry in the table). */
const strayLines = new WeakMap<object, number>();

/** The call a lost line of core `from`'s was for: the one its start names, else its handshake's. */
export function lineKey(head: string, calls?: Calls, from?: unknown): string | undefined {
  return idOfLine(head) ?? handshakeOf(calls, from);
}

/**
 * The initialize call written to core `from` (any core, when not given) and not yet answered,
 * once that core wrote more than HANDSHAKE_STRAY_LINES lines that are no protocol message before
 * answering it: a program that is not local-ai (`yes`) fails start() at once, where its lines were
 * counted one by one on the host's thread until the handshake's time limit. Not at the first such
 * line: a launcher's banner failed a start that had always worked (and showed the host its text).
 */
function handshakeOf(calls: Calls | undefined, from: unknown): string | undefined {
  for (const [id, call] of calls ?? []) {
    const { method, sentTo } = call;
    if (method !== "initialize" || sentTo === undefined || (from !== undefined && sentTo !== from)) continue;
    const seen = (strayLines.get(call) ?? 0) + 1;
    strayLines.set(call, seen);
    return seen > HANDSHAKE_STRAY_LINES ? id : undefined;
  }
  return undefined;
}

/**
 * The oldest of the pending calls written to core `to` (any core, when not given) as a line of
 * `bytes` bytes (as the core counts them: UTF-8, the newline left out), measured as each was written.
 */
export function sentAsLineOf(
  pending: ReadonlyMap<string, { lineBytes?: number | undefined; sentTo: unknown }>,
  bytes: number,
  to?: unknown,
): string | undefined {
  for (const [id, { lineBytes, sentTo }] of pending)
    if (sentTo !== undefined && (to === undefined || sentTo === to) && lineBytes === bytes) return id;
  return undefined;
}

/**
 * The one cancellable call pending, as the core picks the one a `cancel` without an id stops
 * (`implicitCandidates`: none of BY_ID_ONLY, a search or an unload, nor one it is already
 * cancelling); undefined when there are none or several. Cancelled by its id, it ends as chat.cancel() ends it, also when the
 * core confirms but never ends it: the id-less form left such a chat pending for good.
 */
export function sole(
  pending: ReadonlyMap<string, { method: string; cancellable: boolean; cancelSent?: boolean }>,
): string | undefined {
  const ids = [...pending]
    .filter(([, c]) => c.cancellable && !c.cancelSent && !BY_ID_ONLY.has(c.method))
    .map(([id]) => id);
  return ids.length === 1 ? ids[0] : undefined;
}

/**
 * The line a request is written as, or why it cannot be: params JSON cannot carry (a cycle, a
 * BigInt, a toJSON that throws) fail that call alone with invalid_request, never the code writing it.
 */
export function requestLine(id: string, method: string, params: unknown): string | LocalAiError {
  try {
    return JSON.stringify({ id, method, params });
  } catch (err) {
    return callError(
      "invalid_request",
      // thrownText: a toJSON that throws null made `.message` a TypeError out of the call.
      `${method} params cannot be sent as JSON: ${thrownText(err)}`,
      method,
    );
  }
}

/** The id a line's start carries as the core writes it (`{"id":7,` or `{"id":"x",`), as pending keys are. */
export function idOfLine(head: string): string | undefined {
  const m = /^\{"id":(-?\d[\d.eE+-]*|"(?:[^"\\]|\\.)*")[,}]/.exec(head);
  if (!m) return undefined;
  try {
    const id = JSON.parse(m[1]!) as unknown;
    return typeof id === "string" || typeof id === "number" ? String(id) : undefined;
  } catch {
    return undefined;
  }
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * A parsed JSON value as text for a log message. String() throws on an object whose toString is
 * not a function (`{"toString":1}`), and a throw while routing the core's stdout is an uncaught
 * exception in the host; JSON.stringify of what JSON.parse made never throws.
 */
export function asText(value: unknown): string {
  return typeof value === "string" ? value : String(JSON.stringify(value));
}

export function clip(line: string): string {
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}
