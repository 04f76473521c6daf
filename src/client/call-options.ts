import { callError, LocalAiError } from "./errors.ts";
import { thrownText } from "./host-callbacks.ts";
import type { AbortSignalLike, CallOptions } from "./host-types.ts";

/** A call's options as the connection (connection.ts) uses them: checked, NaN and null left out. */
export interface CheckedCallOptions {
  /** Undefined: the call's default limit. */
  timeoutMs: number | undefined;
  signal: AbortSignalLike | undefined;
}

/** A call's options as the host handed them, each read once (`readCallOptions`). */
export interface ReadCallOptions {
  timeoutMs?: unknown;
  signal?: unknown;
  onOtherEvent?: unknown;
  cancellable?: unknown;
}

/** A call's options as a call takes them: as the host gave them, read once, or already refused. */
export type GivenOptions = CallOptions | ReadCallOptions | LocalAiError | null | undefined;

/**
 * Each option read once, here: a getter or Proxy that throws (or a signal whose `aborted` does)
 * fails the call with `invalid_request`, as its promise's failure, never a throw out of the call.
 */
export function readCallOptions(options: GivenOptions, method: string): ReadCallOptions | LocalAiError {
  if (options instanceof LocalAiError) return options;
  try {
    const { timeoutMs, signal, onOtherEvent, cancellable } = (options ?? {}) as ReadCallOptions;
    return { timeoutMs, signal, onOtherEvent, cancellable };
  } catch (err) {
    return unreadable(method, err);
  }
}

/**
 * A cancel's options: a limit of the caller's own is kept, none (no options, `{}`, null, a NaN) is
 * `boundMs`. client.cancel(id) handed `{}` on, and with requestTimeoutMs 0 it waited on a stuck core
 * for good. One that is no number (text from a settings file) is kept too, for checkCallOptions to
 * refuse as it does every call's: replaced by the bound, it was ignored without a word.
 */
export function cancelOptions(given: GivenOptions, boundMs: number): ReadCallOptions | LocalAiError {
  const read = readCallOptions(given, "cancel");
  if (read instanceof LocalAiError) return read;
  const none = read.timeoutMs == null || Number.isNaN(read.timeoutMs);
  return none ? { ...read, timeoutMs: boundMs } : read;
}

/** The call's failure when reading its options threw (`what` failed: `err`). */
export function unreadable(
  method: string,
  err: unknown,
  what = "the call's options could not be read",
): LocalAiError {
  // thrownText: String() of a null-prototype object threw out of the call, which stayed pending.
  return callError("invalid_request", `${what}: ${thrownText(err)}`, method);
}

/**
 * The options a host handed a call, or the error the call fails with, unsent: never a throw, as
 * a call's failures are its promise's. `null` is no options (plain-JS hosts pass it), and so is
 * a `null` field; a `timeoutMs` of NaN (Number() of an unset setting) is the default.
 */
export function checkCallOptions(options: GivenOptions, method: string): CheckedCallOptions | LocalAiError {
  const read = readCallOptions(options, method);
  if (read instanceof LocalAiError) return read;
  const { timeoutMs, signal, onOtherEvent, cancellable } = read;
  // A string from a settings file silently took the default, 60 s (none for a chat).
  if (timeoutMs != null && typeof timeoutMs !== "number")
    return callError(
      "invalid_request",
      `timeoutMs must be a number of ms, not a ${typeof timeoutMs}`,
      method,
    );
  // One that is not an AbortSignal threw out of the call, which stayed in the pending table.
  if (signal != null && !isSignal(signal))
    return callError("invalid_request", `signal must be an AbortSignal, not ${describe(signal)}`, method);
  // A chat's onOtherEvent that is no function was a logger warning for each event it was due;
  // a stream's cancellable "false" (text from a settings file) made it cancellable.
  if (onOtherEvent != null && typeof onOtherEvent !== "function")
    return callError(
      "invalid_request",
      `onOtherEvent must be a function, not a ${typeof onOtherEvent}`,
      method,
    );
  if (cancellable != null && typeof cancellable !== "boolean")
    return callError("invalid_request", `cancellable must be a boolean, not a ${typeof cancellable}`, method);
  // Aborted before it was made: nothing is sent, as fetch() does. Sent, a sessions.delete would
  // still delete (a short call's abort only ends the wait), a chat or warmup start llama-server.
  let aborted: boolean;
  try {
    aborted = !!(signal as AbortSignalLike | undefined)?.aborted;
  } catch (err) {
    return unreadable(method, err);
  }
  if (aborted) return callError("cancelled", "the request was aborted before it was sent", method);
  // A deadline already past (`deadline - Date.now()` computed late) was no limit at all.
  if (typeof timeoutMs === "number" && timeoutMs < 0) {
    const message = `${method}'s deadline had passed before it was sent (timeoutMs ${timeoutMs})`;
    return new LocalAiError("timeout", message, { timeout_ms: timeoutMs }, method);
  }
  return {
    timeoutMs: typeof timeoutMs === "number" && !Number.isNaN(timeoutMs) ? timeoutMs : undefined,
    signal: (signal ?? undefined) as AbortSignalLike | undefined,
  };
}

function isSignal(value: unknown): value is AbortSignalLike {
  const s = value as Partial<AbortSignalLike>;
  return (
    typeof value === "object" &&
    typeof s.addEventListener === "function" &&
    typeof s.removeEventListener === "function"
  );
}

function describe(value: unknown): string {
  return typeof value === "object" ? "an object without addEventListener" : `a ${typeof value}`;
}
