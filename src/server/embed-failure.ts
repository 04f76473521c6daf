import { EmbedError } from "../llama/embed-error.ts";
import { LlmError } from "../llama/errors.ts";
import { CoreError } from "../protocol/errors.ts";

/**
 * What a failed `embed` tells the host (docs/protocol.md#embed). An input the server refuses is
 * `invalid_request` naming it (recording 114); the embedding server's own failure (it died,
 * answered 5xx or something unusable) is `internal_error` saying what happened, with
 * `data.reason` the failure's kind as a chat's is, never the bare "see the core's log" of an
 * unexpected error. A cancel or a forced unload keeps its own reason.
 */
export function embedFailure(err: unknown, signal: AbortSignal): unknown {
  if (err instanceof EmbedError) return embedRefusal(err);
  if (err instanceof LlmError && !signal.aborted)
    return new CoreError("internal_error", `the embedding model's llama-server failed: ${err.message}`, {
      reason: err.kind,
      ...err.data,
    });
  return err;
}

/**
 * An input the server refuses, named by its place (docs/protocol.md#embed; recording 114); one
 * that crashes the server, or that the model gives a vector holding NaN, says so in
 * `data.reason`, so memory's job sets it aside rather than cut it as too long.
 */
function embedRefusal(err: EmbedError): CoreError {
  if (err.kind === "not_supported")
    return new CoreError("invalid_request", `model: ${err.message}`, { field: "model" });
  const field = err.data.index === undefined ? "input" : `input.${err.data.index}`;
  const reason = err.kind === "crashes_server" || err.kind === "not_finite" ? { reason: err.kind } : {};
  return new CoreError("invalid_request", `${field}: ${err.message}`, { field, ...err.data, ...reason });
}
