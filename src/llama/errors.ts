import { readCapped } from "../util/capped-body.ts";
import { terminalText } from "../util/terminal-text.ts";
import { cutText, wholeCharCut } from "../util/text-cut.ts";

/**
 * llama-server's failures, named so a caller can react (retry with less, restart it, give up).
 * Error bodies are `{"error": {"code", "message", "type", …}}` in either key order
 * (test/fixtures/llama-server/transcripts/20–26, 76, 93b, 93e), so they are parsed, never matched
 * as text.
 */

/**
 * What went wrong with a request. `server_error`: llama-server failed it (a 5xx that is not
 * about the request), so it may need a restart; `bad_response`: it refused the request (a 4xx, or a
 * 500 from its JSON parser: test/fixtures/llama-server/transcripts/20, 20c, 91g; a grammar's dead
 * end; an image its encoder failed) or answered
 * something unusable; `context_overflow`: the prompt does not fit the slot (22); `connection_lost`:
 * no answer, or the answer was cut off. These are the turn's `data.reason`s (protocol/errors.ts).
 */
export type LlmErrorKind = "context_overflow" | "server_error" | "connection_lost" | "bad_response";

export class LlmError extends Error {
  constructor(
    readonly kind: LlmErrorKind,
    message: string,
    /** What a chat's error carries to the host: `status`, or the overflow's token counts. */
    readonly data: Record<string, unknown> = {},
    /** The HTTP status and llama-server's `error.type`, when it answered with one. */
    readonly status?: number,
    readonly type?: string,
  ) {
    super(message);
    this.name = "LlmError";
  }
}

/**
 * Nothing listens on llama-server's port (ECONNREFUSED): the request never reached a server, so
 * it did nothing there and may be sent again; a server we started that refuses is gone. Reset or
 * cut connections are plain `connection_lost`: the request may have been read.
 */
export class ConnectionRefused extends LlmError {
  constructor(message: string) {
    super("connection_lost", message);
    this.name = "ConnectionRefused";
  }
}

/** The `error` object of a llama-server error body; absent fields are undefined. */
export interface ErrorBody {
  message?: string;
  type?: string;
  n_prompt_tokens?: number;
  n_ctx?: number;
}

/**
 * Longest message of llama-server's own the host gets in a chat's error (the recorded ones are
 * under 300 characters, transcripts/20–26; a broken server's can be an event's 8 MiB).
 */
export const MAX_SERVER_MESSAGE_CHARS = 1000;

/** llama-server's message as the host gets it: bounded, cut between characters, well-formed. */
export const serverMessage = (message: string): string =>
  cutText(message, MAX_SERVER_MESSAGE_CHARS).toWellFormed();

/** The error object of a body, or undefined when it is not llama-server's error JSON. */
export function errorBody(text: string): ErrorBody | undefined {
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error;
    return typeof error === "object" && error !== null ? (error as ErrorBody) : undefined;
  } catch {
    return undefined;
  }
}

/** A 500 that llama-server's JSON parser raised: the request was malformed, the server is fine. */
const PARSER_FAULT = /\[json\.exception\./;

/**
 * llama-server's 500 for a finished reply its chat parser cannot read ("The model produced output
 * that does not match the expected peg-native format", transcripts/quirks/90, 90d: a body, or an
 * error event closing a stream). The model slipped, the server is fine: `bad_response` with
 * `problem: "unparsed_reply"`, which the turn answers like a malformed tool call.
 */
const UNPARSED_REPLY = /The model produced output that does not match the expected \S+ format/;

/** The LlmError for llama-server's error message `message`, when it is an unparsed reply. */
export function unparsedReply(message: string, status?: number): LlmError | undefined {
  if (!UNPARSED_REPLY.test(message)) return undefined;
  return new LlmError("bad_response", `llama-server: ${message}`, { problem: "unparsed_reply" }, status);
}

export function isUnparsedReply(err: LlmError): boolean {
  return err.kind === "bad_response" && err.data.problem === "unparsed_reply";
}

/**
 * llama-server's 500 when its KV cache has no room left even for one token: b10587's `decode`
 * (server-context.cpp, `llama_decode` 1 at a batch of 1) sends "Context size has been exceeded."
 * with the default ERROR_TYPE_SERVER to every slot in flight, clears and releases them, and serves
 * on. Slots that share the cache (`--kv-unified`) or a draft model's tokens fill it. The context
 * is full, the server not broken: a restart would change nothing but fail the other chats again,
 * so it fails that request (`problem: "context_full"`, which a host may send again).
 */
const CONTEXT_FULL = /^Context size has been exceeded\./;

function contextFull(
  message: string,
  status: number | undefined,
  type: string | undefined,
): LlmError | undefined {
  if (!CONTEXT_FULL.test(message)) return undefined;
  return new LlmError(
    "bad_response",
    `llama-server's context is full (every chat in flight on it was stopped; send it again, or raise model.context or lower llama.parallel): ${message}`,
    { ...(status === undefined ? {} : { status }), problem: "context_full" },
    status,
    type,
  );
}

/** The LlmError for an answer with an error status (its body read as text, bounded in the message). */
export function statusError(status: number, statusText: string, text: string): LlmError {
  const body = errorBody(text);
  // Text, as the chat's error carries it to the host: cut between characters, and an escaped
  // lone surrogate in the body's JSON made U+FFFD (docs/protocol.md "Text").
  const stated = typeof body?.message === "string" ? serverMessage(body.message) : undefined;
  // The reason phrase is the server's text too (a head holds 64 KiB of it: stream-socket.ts).
  const cut = (t: string) => t.slice(0, wholeCharCut(t, 300));
  const message = stated ?? (cut(text) || cut(statusText));
  const type = body?.type;
  if (type === "exceed_context_size_error") return overflowError(message, body, status);
  if (status === 413) {
    // Its HTTP layer's body cap (data-url.ts, LLAMA_MAX_BODY_BYTES), which the turn's images
    // are budgeted under: the turn refuses the images by name (agent/turn/images.ts).
    return new LlmError(
      "bad_response",
      `llama-server refused the request as too large (HTTP 413: ${message})`,
      { status, problem: "too_large" },
      status,
      type,
    );
  }
  const unparsed = unparsedReply(message, status) ?? contextFull(message, status, type);
  if (unparsed) return unparsed;
  return new LlmError(
    refusedBy(status, message) ? "bad_response" : "server_error",
    `llama-server answered HTTP ${status}: ${message}`,
    { status },
    status,
    type,
  );
}

/**
 * A 500 for a grammar's dead end: the model's token left the grammar (a tool's schema or the
 * `response_format`'s) nothing to accept. b10587 catches the throw for its slot alone and
 * releases it ("got exception: Unexpected empty grammar stack after accepting piece: …",
 * server-context.cpp `iterate`, type server_error): the server serves on, a restart would only
 * fail everyone else's chats (ggml-org/llama.cpp#27619 makes it from a tool's description).
 */
const GRAMMAR_DEAD_END = /^got exception: Unexpected empty grammar stack after accepting piece/;

/**
 * A 500 for a slot's image the vision encoder (or the decode of its embeddings) failed: b10587
 * sends it for that slot alone and releases it (server-context.cpp, "failed to process mtmd
 * chunk"). Its encoder is warmed up on a small image (clip.cpp, "avoid OOM on warmup"), so a
 * large image of a dynamic-resolution model can grow the graph past the device's memory: the
 * request's cost, which a restart does not change, and the image is resent every turn.
 */
const IMAGE_NOT_PROCESSED = /^failed to process mtmd chunk/;

/**
 * A 500 for images sent to a server with no projector (transcripts/105; the chat gets
 * `model_not_vision`, agent/turn/images.ts): what it can read, not a failure. A restart brings
 * back the same server with the same flags, whose /props is read again and says the same (or,
 * on a build whose /props names no modalities, nothing): each image chat would restart it again.
 */
const NO_IMAGE_INPUT = /^image input is not supported/;

/** The request's fault, not the server's: a 4xx, or a 500 from its JSON parser, a grammar's dead end or an image. */
const refusedBy = (status: number, message: string) =>
  status < 500 ||
  PARSER_FAULT.test(message) ||
  GRAMMAR_DEAD_END.test(message) ||
  IMAGE_NOT_PROCESSED.test(message) ||
  NO_IMAGE_INPUT.test(message);

const count = (value: unknown): number | undefined =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;

function overflowError(message: string, body: ErrorBody | undefined, status: number | undefined): LlmError {
  return new LlmError(
    "context_overflow",
    `the conversation does not fit the model's context: ${message}`,
    // Numbers or nothing: an embed's error carries them to the host as they are.
    { n_prompt_tokens: count(body?.n_prompt_tokens), n_ctx: count(body?.n_ctx) },
    status,
    body?.type,
  );
}

/**
 * The LlmError for an `error` event inside a stream, after its 200 (`data: {"error": {"code",
 * "message", "type"}}`, quirks/90d). llama-server sends a task's error result this way once the
 * stream began (server-context.cpp, the stream's next-chunk callback): the same object its status
 * answer carries (server-common.cpp `format_error_response`, `code` being the status it would have
 * had), so it is classified as that status would be: a request's fault (a 4xx,
 * `exceed_context_size_error`) fails that request alone and restarts nothing; a 5xx, or an event
 * that names no status (another shape: a proxy's, a broken server's), stays `server_error`.
 * `message` is the host's text of it (stream-reply.ts: cut, or the event's excerpt when not text).
 */
export function eventError(error: Record<string, unknown>, message: string): LlmError {
  const unparsed = unparsedReply(message);
  if (unparsed) return unparsed;
  const status = requestStatus(error);
  const type = typeof error.type === "string" ? error.type : undefined;
  const full = contextFull(message, status, type);
  if (full) return full;
  if (type === "exceed_context_size_error") return overflowError(message, error as ErrorBody, status);
  if (status !== undefined && refusedBy(status, message)) {
    return new LlmError(
      "bad_response",
      `llama-server refused the request mid-stream (${status}): ${message}`,
      { status },
      status,
      type,
    );
  }
  const data = status !== undefined ? { status } : {};
  return new LlmError("server_error", `llama-server: ${message}`, data, status, type);
}

/** An error event's status: its `code` when that is one; else 400 for `invalid_request_error`. */
function requestStatus(error: Record<string, unknown>): number | undefined {
  const code = error.code;
  if (typeof code === "number" && Number.isInteger(code) && code >= 400 && code <= 599) return code;
  return error.type === "invalid_request_error" ? 400 : undefined;
}

/**
 * The most of an error answer's body that is read: its message is in its first characters, and
 * a body that never ends (a broken proxy, a hostile program on the port) would otherwise fill
 * memory at loopback speed before any deadline fires. The streamed chat's bound is the same
 * (stream-socket.ts `ANSWER_LIMITS.errorChars`).
 */
export const MAX_ERROR_BODY_BYTES = 64 * 1024;

/**
 * An error answer's body as text, at most MAX_ERROR_BODY_BYTES of it (the rest never read); ""
 * when it was cut off (the status still says what happened), the signal's reason when it aborted.
 */
export async function errorText(res: Response, signal?: AbortSignal): Promise<string> {
  try {
    return new TextDecoder().decode((await readCapped(res, MAX_ERROR_BODY_BYTES)).bytes);
  } catch {
    if (signal?.aborted) throw signal.reason;
    return "";
  }
}

/** The LlmError for a response whose status is not ok (its body is read, bounded, so nothing leaks). */
export async function responseError(res: Response): Promise<LlmError> {
  return statusError(res.status, res.statusText, await errorText(res));
}

/** A body that should be JSON but is not, quoted (80 characters at most) in the message. */
export function notJson(what: string, text: string): LlmError {
  return new LlmError("bad_response", `llama-server sent ${what} that is not JSON: ${excerpt(text)}`);
}

/** Escaped as JSON, then as the log escapes what JSON leaves raw (bidi overrides, C1 controls). */
export function excerpt(data: string): string {
  return terminalText(JSON.stringify(data.length > 80 ? `${data.slice(0, 80)}…` : data));
}

/**
 * How a slot action failed, beyond the request's own failures
 * (test/fixtures/llama-server/transcripts/93b, 93c, 93e): `not_supported`, llama-server was started
 * without `--slot-save-path` (501); `restore_failed`, no such file, or one saved by a model of
 * another shape (400; the slot is left empty); `invalid_filename`, a name with a path in it (400).
 */
export type SlotErrorKind = "not_supported" | "restore_failed" | "invalid_filename";

export class SlotError extends Error {
  constructor(
    readonly kind: SlotErrorKind,
    message: string,
    readonly slot: number,
  ) {
    super(message);
    this.name = "SlotError";
  }
}
