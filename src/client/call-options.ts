import { numberOr } from "./client-options.ts";
import { callError, LocalAiError } from "./errors.ts";
import type { AbortSignalLike, CallOptions } from "./host-types.ts";

/** A call's options as the connection (connection.ts) uses them: checked, NaN left out. */
export interface CheckedCallOptions {
  /** Undefined: the call's default limit. */
  timeoutMs: number | undefined;
  signal: AbortSignalLike | undefined;
}

/**
 * The options a host handed a call, or the error the call fails with, unsent: never a throw, as
 * a call's failures are its promise's. `null` is no options (plain-JS hosts pass it); a
 * `timeoutMs` of NaN (Number() of an unset setting) is the default.
 */
export function checkCallOptions(
  options: CallOptions | null | undefined,
  method: string,
): CheckedCallOptions | LocalAiError {
  const { timeoutMs, signal } = options ?? {};
  // Aborted before it was made: nothing is sent, as fetch() does. Sent, a sessions.delete would
  // still delete (a short call's abort only ends the wait), a chat or warmup start llama-server.
  if (signal?.aborted) return callError("cancelled", "the request was aborted before it was sent", method);
  // A deadline already past (`deadline - Date.now()` computed late) was no limit at all.
  if (typeof timeoutMs === "number" && timeoutMs < 0) {
    const message = `${method}'s deadline had passed before it was sent (timeoutMs ${timeoutMs})`;
    return new LocalAiError("timeout", message, { timeout_ms: timeoutMs }, method);
  }
  return { timeoutMs: numberOr(timeoutMs, undefined), signal };
}
