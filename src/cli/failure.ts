import { isCoreError } from "../protocol/errors.ts";
import { logger, logUnexpected } from "../util/logger.ts";

/** A failed command as a script reads it (`--json`), and as a person does. */
export interface Failure {
  code: string;
  message: string;
  data?: unknown;
}

/**
 * What a command's failure tells a script, logged on stderr once: a CoreError as its one line,
 * anything else as its trace (the script gets internal_error, never the trace).
 */
export function reportFailure(err: unknown, command: string): Failure {
  if (isCoreError(err)) {
    logger.error(`${err.code}: ${err.message}`);
    return { code: err.code, message: err.message, ...(err.data ? { data: err.data } : {}) };
  }
  logUnexpected("fatal", err);
  return { code: "internal_error", message: `internal error in ${command}; see stderr for details` };
}
