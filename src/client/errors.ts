import type { ExitInfo } from "./core-process.ts";
import type { ErrorCode } from "./protocol-types.ts";

/**
 * Codes the client itself raises, beside the core's own (SPEC §2):
 * - `core_exited`: the core process ended (or could not start) while the call was pending
 * - `timeout`: the call's time limit passed before its terminal message
 * - `protocol_error`: the core answered this call with a message that breaks the protocol
 * - `client_closed`: the client was shut down or closed before the call could finish
 */
export const CLIENT_ERROR_CODES = ["core_exited", "timeout", "protocol_error", "client_closed"] as const;
export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];

export type LocalAiErrorCode = ErrorCode | ClientErrorCode;

/** Every failure a call can end with: a protocol error from the core, or one of the client's own. */
export class LocalAiError extends Error {
  readonly code: LocalAiErrorCode;
  readonly data: Record<string, unknown> | undefined;
  /** The method of the call that failed, when there was one. */
  readonly method: string | undefined;

  constructor(code: LocalAiErrorCode, message: string, data?: Record<string, unknown>, method?: string) {
    super(message);
    this.name = "LocalAiError";
    this.code = code;
    this.data = data;
    this.method = method;
  }
}

export function isLocalAiError(err: unknown, code?: LocalAiErrorCode): err is LocalAiError {
  return err instanceof LocalAiError && (code === undefined || err.code === code);
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
