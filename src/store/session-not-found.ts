import { CoreError } from "../protocol/errors.ts";
import type { CopyOutcome } from "./erase-copies.ts";

/** `copies`: what a delete of it did with the databases set aside, when any was there. */
export function sessionNotFound(sessionId: string, copies: readonly CopyOutcome[] = []): CoreError {
  return new CoreError("invalid_request", `params.session_id: no session '${sessionId}' for this user`, {
    field: "session_id",
    reason: "session_not_found",
    ...(copies.length > 0 ? { set_aside_copies: copies } : {}),
  });
}
