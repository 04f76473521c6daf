/**
 * Every error code the protocol may put in an `error` message (SPEC §2). A plain list, so the
 * start-up path (which needs CoreError) does not load zod; ErrorCodeSchema in messages.ts is
 * built from it.
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
  "cancelled",
  "internal_error",
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * The one error type that crosses the protocol boundary. Anything else thrown by a handler
 * becomes `internal_error` with a generic message; its stack goes to stderr only.
 */
export class CoreError extends Error {
  readonly code: ErrorCode;
  readonly data: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, data?: Record<string, unknown>) {
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
