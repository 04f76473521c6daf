import { MAX_QUEUED_INPUT_BYTES } from "./core-process.ts";
import type { ErrorDataByCode } from "./error-data.ts";
import type { ExitInfo } from "./host-types.ts";
import type { ErrorCode } from "./protocol-types.ts";

/**
 * Codes the client itself raises, beside the core's own (docs/protocol.md#errors):
 * - `core_exited`: the core process ended (or could not start) while the call was pending
 * - `timeout`: the call's time limit passed before its terminal message
 * - `protocol_error`: the core answered this call with a message that breaks the protocol
 * - `client_closed`: the client was shut down or closed before the call could finish
 * - `core_backlog`: the core is not reading its input and 64 MiB of requests wait for it; the
 *   call was not sent (core-process.ts MAX_QUEUED_INPUT_BYTES)
 */
export const CLIENT_ERROR_CODES = [
  "core_exited",
  "timeout",
  "protocol_error",
  "client_closed",
  "core_backlog",
] as const;
export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];

export type LocalAiErrorCode = ErrorCode | ClientErrorCode;

/** What `data` holds for a code (`ErrorDataByCode`); `LocalAiErrorData` alone is any of them. */
export type LocalAiErrorData<C extends LocalAiErrorCode = LocalAiErrorCode> = ErrorDataByCode[C];

/**
 * Every failure a call can end with: a protocol error from the core, or one of the client's own.
 * `data` is typed by `code`: narrow with `isLocalAiError(err, "config_invalid")`, or compare
 * `code` on an `AnyLocalAiError`.
 */
export class LocalAiError<C extends LocalAiErrorCode = LocalAiErrorCode> extends Error {
  readonly code: C;
  readonly data: ErrorDataByCode[C] | undefined;
  /** The method of the call that failed, when there was one. */
  readonly method: string | undefined;

  constructor(code: C, message: string, data?: ErrorDataByCode[C], method?: string) {
    super(message);
    this.name = "LocalAiError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

/**
 * Marks a LocalAiError of any copy of this package. The exports map gives import() index.mjs and
 * require() index.cjs: a host using both holds two LocalAiError classes, and `instanceof` one
 * of them misses the other's errors (Node's "dual package hazard"). Symbol.for is one per process.
 */
const BRAND = Symbol.for("@local-ai/client.LocalAiError");
Object.defineProperty(LocalAiError.prototype, BRAND, { value: true });

/** A LocalAiError of any code, as a union: checking `code` narrows `data`. */
export type AnyLocalAiError = { [C in LocalAiErrorCode]: LocalAiError<C> }[LocalAiErrorCode];

export function isLocalAiError(err: unknown): err is AnyLocalAiError;
export function isLocalAiError<C extends LocalAiErrorCode>(err: unknown, code: C): err is LocalAiError<C>;
export function isLocalAiError(err: unknown, code?: LocalAiErrorCode): boolean {
  const ours = typeof err === "object" && err !== null && (err as { [BRAND]?: unknown })[BRAND] === true;
  return ours && (code === undefined || (err as LocalAiError).code === code);
}

/**
 * `data` for one more error of several failed by one cause (an exit): shared, a host that changed
 * one error's data changed all of theirs. Its arrays and plain objects are copied, its strings
 * shared (they cannot change): a structured clone held a stderr tail's text (50 lines of up to
 * 64 KiB) anew for every call pending at a crash. Anything else is kept, as is data too deep to walk.
 */
export function ownCopy<D>(data: D): D {
  try {
    return copied(data) as D;
  } catch {
    return data;
  }
}

function copied(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copied);
  if (value === null || typeof value !== "object") return value;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, copied(v)]));
}

/**
 * An error as the core sent it. Its `data` is trusted to match the code's shape: the protocol
 * says so, and test/client/error-data.test.ts holds the core to it.
 */
export function errorFromCore(
  code: LocalAiErrorCode,
  message: string,
  data: Record<string, unknown> | undefined,
  method: string | undefined,
): LocalAiError {
  return new LocalAiError(code, message, data as LocalAiErrorData | undefined, method);
}

/** The error an error message of the core carries, its code and message already found strings. */
export function errorOfMessage(msg: Record<string, unknown>, method: string): LocalAiError {
  const { code, message, data } = msg;
  const object = typeof data === "object" && data !== null && !Array.isArray(data);
  // Codes newer than this client still come through as they are.
  return errorFromCore(
    code as LocalAiErrorCode,
    message as string,
    object ? (data as Record<string, unknown>) : undefined,
    method,
  );
}

/** An error of the client's own making for a call of `method`, without data. */
export function callError(code: LocalAiErrorCode, message: string, method: string): LocalAiError {
  return new LocalAiError(code, message, undefined, method);
}

/** A call of `method` that got no terminal message within its `timeoutMs`. */
export function timeoutError(method: string, timeoutMs: number): LocalAiError {
  const message = `${method} got no answer within ${timeoutMs} ms`;
  return new LocalAiError("timeout", message, { timeout_ms: timeoutMs }, method);
}

/** A call not sent: MAX_QUEUED_INPUT_BYTES already wait for the core to read them. */
export function coreBacklogError(queuedBytes: number, method: string): LocalAiError {
  const data = { queued_bytes: queuedBytes, limit_bytes: MAX_QUEUED_INPUT_BYTES };
  const message = `the core is not reading its input: ${queuedBytes} bytes of requests wait for it`;
  return new LocalAiError("core_backlog", message, data, method);
}

/** The answer to a call of `method` came as a line over the client's `limit`, and was dropped. */
export function oversizeAnswerError(method: string, bytes: number, limit: string): LocalAiError {
  const message = `the core's ${method} answer was a ${bytes}-byte line, over this client's ${limit}, and was dropped; raise maxLineBytes or ask for less`;
  return new LocalAiError("protocol_error", message, { line_bytes: bytes }, method);
}

/** A call made before the lifecycle gave the connection a route. */
export function notConnectedError(method: string): LocalAiError {
  return callError("core_exited", "no core is attached to this connection", method);
}

/** The `core_exited` error of a core that ended (or never started), with why in `data`. */
export function coreExitedError(info: ExitInfo): LocalAiError {
  const how = info.spawnError
    ? `could not be started (${info.spawnError})`
    : info.signal
      ? `was killed by ${info.signal}`
      : `exited with code ${info.code}`;
  return new LocalAiError("core_exited", `the local-ai core ${how}`, {
    exit_code: info.code,
    signal: info.signal,
    ...(info.spawnError ? { spawn_error: info.spawnError } : {}),
    stderr_tail: info.stderrTail,
  });
}

/** The `core_exited` error of a core that closed its stdout and runs on: it cannot answer now. */
export function coreOutputClosedError(stderrTail: string[]): LocalAiError {
  return new LocalAiError("core_exited", "the local-ai core closed its stdout and can no longer answer", {
    exit_code: null,
    signal: null,
    stderr_tail: stderrTail,
  });
}

/** The `core_exited` error of a core that closed its stdin and runs on: it cannot be asked now. */
export function coreInputClosedError(stderrTail: string[]): LocalAiError {
  return new LocalAiError(
    "core_exited",
    "the local-ai core closed its stdin and can no longer be asked anything",
    {
      exit_code: null,
      signal: null,
      stderr_tail: stderrTail,
    },
  );
}

/** The `core_exited` error of a core that left its input unread too long: it is taken for hung. */
export function coreInputStalledError(
  stalledMs: number,
  queuedBytes: number,
  stderrTail: string[],
): LocalAiError {
  return new LocalAiError(
    "core_exited",
    `the local-ai core read none of its input for ${stalledMs} ms (${queuedBytes} bytes waiting) and is taken for hung`,
    { exit_code: null, signal: null, stderr_tail: stderrTail },
  );
}
