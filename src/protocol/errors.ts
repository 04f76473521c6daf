/**
 * Every error code the protocol may put in an `error` message (docs/protocol.md#errors). A plain
 * list, so the start-up path (which needs CoreError) does not load zod; ErrorCodeSchema in
 * messages.ts is built from it.
 */
export const ERROR_CODES = [
  "config_missing",
  "config_invalid",
  "binary_missing",
  "model_missing",
  "model_plan_error",
  "unknown_method",
  "invalid_request",
  "invalid_json",
  "output_invalid",
  "cancelled",
  // More requests in flight than the core holds (MAX_IN_FLIGHT): nothing was done; retry later.
  "too_many_requests",
  "internal_error",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * What `data.reason` of an error may say: why a chat failed past its code (the LLM client's
 * failure kinds, and `server_failed` when llama-server died or wedged mid-request; a document
 * that is none of the formats read, docs/agent.md "Documents"). A plain
 * list for the same reason as ERROR_CODES; ErrorReasonSchema in messages.ts is built from it.
 */
export const ERROR_REASONS = [
  "context_overflow",
  "server_error",
  "connection_lost",
  "bad_response",
  "server_failed",
  "session_not_found",
  "session_deleted",
  "model_not_found",
  "model_busy",
  "unsupported_format",
  "model_not_vision",
  "attachment_not_found",
  // documents.* (docs/protocol.md "Documents"): an unknown document; a user erased while an add
  // ran; the document itself deleted while it was embedded; a cancelled add's saved KV states
  // quoting it that could not be removed, or the document itself (`documents.delete` it again).
  "document_not_found",
  "user_deleted",
  "document_deleted",
  "kv_state_left",
  "document_left",
  // A string in params with a lone UTF-16 surrogate (docs/protocol.md "Text").
  "not_well_formed",
  // `resume: true`, no input, and no interrupted turn to resume.
  "nothing_to_resume",
  // sessions.export: over what one answer carries (name a `path`); a `path` that cannot be written.
  "export_too_large",
  "path_unwritable",
  // sessions.export: an edit replaced what it had read, three starts running.
  "session_edited",
  // embed: a string the embedding server crashed on each time it was sent (not sent again); a
  // string the model gave a vector holding NaN or infinity.
  "crashes_server",
  "not_finite",
  // A request line over stdio.max_line_bytes: its id was never read (`data.line_bytes` lets the
  // host find which of its lines it was).
  "line_too_long",
] as const;
export type ErrorReason = (typeof ERROR_REASONS)[number];

/** An error's details: free-form, except that `reason` is one of ERROR_REASONS. */
export type CoreErrorData = { reason?: ErrorReason } & Record<string, unknown>;

/**
 * The one error type that crosses the protocol boundary. Anything else thrown by a handler
 * becomes `internal_error` with a generic message; its stack goes to stderr only.
 */
export class CoreError extends Error {
  readonly code: ErrorCode;
  readonly data: CoreErrorData | undefined;

  constructor(code: ErrorCode, message: string, data?: CoreErrorData) {
    super(message);
    this.name = "CoreError";
    this.code = code;
    this.data = data;
  }
}

export function isCoreError(err: unknown): err is CoreError {
  return err instanceof CoreError;
}

/** A cancellation error for an aborted signal, so every cancel path reads the same. */
export function cancelledError(reason = "the request was cancelled"): CoreError {
  return new CoreError("cancelled", reason);
}

/**
 * A file or path a request named could not be opened because the core (EMFILE) or the system
 * (ENFILE) has used up its open files: nothing is wrong with the file or the host's request, so
 * not `invalid_request` but `internal_error` saying so, the code in `data.problem`; the same
 * request can succeed once fewer are open. Undefined for any other failure.
 */
export function openFilesUsedUp(err: unknown, what: string): CoreError | undefined {
  // util/read-file.ts's outOfOpenFiles, not imported: this file is on the start-up path.
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code !== "EMFILE" && code !== "ENFILE") return undefined;
  const whose = code === "EMFILE" ? "the core has" : "the system has";
  return new CoreError(
    "internal_error",
    `${what}: ${whose} too many files open (${code}); send it again once fewer requests run, or raise the open-file limit (ulimit -n)`,
    { problem: code },
  );
}
