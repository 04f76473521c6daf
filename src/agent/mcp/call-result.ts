import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { MAX_JSON_DEPTH, nestedDeeperThan } from "../../util/json-depth.ts";

/**
 * A tools/call result as the core reads it. The SDK's CallToolResultSchema refused a part it does
 * not know with a union's worth of issues each: 450,000 such parts, in a line under 1 MiB, then
 * not counted first (util/json-shape.ts), held the main loop over a second and made a 560 MB error
 * message (a hostile review). So the parts are read here, each on its own, and one that is no
 * content is shown as a placeholder, as an image is.
 */
export const CALLED = z.looseObject({
  // Any value: one that is no list is the answer's fault, told as callOutcome tells it.
  content: z.unknown().optional(),
  isError: z.unknown().optional(),
  structuredContent: z.unknown().optional(),
});

export type Called = z.infer<typeof CALLED>;

export interface McpCallOutcome {
  isError: boolean;
  text: string;
}

/** A part's kind as shown in its place: the server's word only when it looks like one. */
const KIND = /^[a-z_]{1,32}$/;

function partText(part: unknown): string {
  if (typeof part !== "object" || part === null) return "[content]";
  const { type, text, resource } = part as { type?: unknown; text?: unknown; resource?: unknown };
  if (type === "text" && typeof text === "string") return text;
  // An embedded text resource is text the server sent, as a text part is (a file server may return
  // a file's contents so); a blob, like an image, is not for the model, and a link is never read.
  const embedded =
    typeof resource === "object" && resource !== null ? (resource as { text?: unknown }).text : undefined;
  if (type === "resource" && typeof embedded === "string") return embedded;
  return `[${typeof type === "string" && KIND.test(type) ? type : "content"}]`;
}

/**
 * The text the model reads: the text parts and embedded text resources, a placeholder for each
 * other part, else the structured content. Throws for an `isError` that is no boolean (MCP's is
 * one): `"true"` read as not `true` made a tool's error a success, and read as truthy `"false"`
 * would be the opposite; the call fails saying why, as an answer the JSON-RPC schema refuses does
 * (child-transport.ts), rather than be read either way. So does a `content` that is no list.
 */
export function callOutcome(result: Called): McpCallOutcome {
  const flag = result.isError;
  if (flag !== undefined && typeof flag !== "boolean")
    throw invalidResult(`isError: a boolean was expected, not ${kindOf(flag)}`);
  const { content } = result;
  // `{"content": "text"}` failed in the SDK's parse: a retryable error quoting zod's issues as JSON.
  if (content !== undefined && !Array.isArray(content))
    throw invalidResult(`content: a list was expected, not ${kindOf(content)}`);
  const text = (content ?? []).map(partText).join("\n");
  const structured = result.structuredContent;
  const shown =
    text === "" && typeof structured === "object" && structured !== null && !Array.isArray(structured)
      ? structuredText(structured)
      : "";
  return { isError: flag === true, text: text || shown };
}

/** A result MCP's schema refuses. It answered: the tool ran (its side effects done) and would answer so again. */
function invalidResult(why: string): McpError {
  const err = new McpError(
    ErrorCode.InternalError,
    `the server's message is not a valid tools/call result (${why})`,
  );
  ANSWERED.add(err);
  return err;
}

function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

/** Checked first: JSON.stringify would throw on it, after holding the main loop (util/json-depth.ts). */
function structuredText(structured: object): string {
  if (nestedDeeperThan(structured)) return `[structured content nested over ${MAX_JSON_DEPTH} levels]`;
  return JSON.stringify(structured);
}

/**
 * JSON-RPC's codes for a request that is itself wrong, which only a server's answer carries (the
 * SDK's own errors are a timeout or a closed connection): the same call fails again. A server
 * whose tool list changed since the chat read it answers so (-32602, unknown tool).
 */
const CALL_WRONG: ReadonlySet<number> = new Set([
  ErrorCode.ParseError,
  ErrorCode.InvalidRequest,
  ErrorCode.MethodNotFound,
  ErrorCode.InvalidParams,
]);

/** Failures read from a server's answer to the call itself (callOutcome): not worth a retry. */
const ANSWERED = new WeakSet<object>();

/**
 * The `data` of the error answer the core makes of an answer the JSON-RPC schema refuses (a
 * result that is no object), or of one of too many values (child-transport.ts). The server answered, as for a `content` that is
 * no list: it was retryable as any -32603. The SDK hands `data` on as it is, so the very object
 * tells it from a server's own -32603, whose `data` is parsed JSON.
 */
export const REFUSED_ANSWER: unknown = Object.freeze({ refused_answer: true });

/** Whether a failed call may succeed if made again: not when the server said the call is wrong, or answered it. */
export function mayRetry(err: unknown): boolean {
  if (typeof err === "object" && err !== null && ANSWERED.has(err)) return false;
  if (err instanceof McpError && err.data === REFUSED_ANSWER) return false;
  return !(err instanceof McpError && CALL_WRONG.has(err.code));
}
