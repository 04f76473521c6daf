import type { ErrorReason } from "./protocol-types.ts";

/**
 * What an error's `data` holds, per code (docs/protocol.md, "Errors"). Fields a code always
 * carries are required; the rest depend on where the error arose and are optional. Every shape
 * stays open (`[field: string]: unknown`): a newer core may add fields.
 * test/client/error-data.test.ts drives the compiled core into each error and checks its data.
 */

type Open = { [field: string]: unknown };

/** A llama-server that failed to start or died: how it ended and its last log lines. */
interface LlamaServerEnd {
  exit_code?: number | null;
  signal?: string | null;
  log_tail?: string[];
}

export interface ErrorDataByCode {
  /** No config file at the path: which path. */
  config_missing: { file: string } & Open;
  /**
   * The config cannot be used: where (file, line, key; null when not known) and, for schema
   * errors, every issue; settings that contradict each other name only the key.
   */
  config_invalid: {
    file?: string;
    line?: number | null;
    key?: string | null;
    issues?: { key: string; message: string }[];
  } & Open;
  /** llama-server not found (the paths tried), or it exited at start-up over its binary. */
  binary_missing: { tried?: string[] } & LlamaServerEnd & Open;
  /**
   * The GGUF is absent, unreadable, not a GGUF or truncated (plan), or llama-server said so; an
   * `hf:` model not (wholly) in the cache says which and the command that fetches it (`pull`).
   * Where its path was set: the config's `key`, or `field: "model"` for a request's own model.
   */
  model_missing: {
    path?: string;
    problem?:
      | "absent"
      | "unreadable"
      | "not_gguf"
      | "truncated"
      | "not_downloaded"
      | "broken_ref"
      | "broken_link"
      | "incomplete_split";
    key?: string;
    field?: "model";
    pull?: string;
  } & LlamaServerEnd &
    Open;
  /** The model does not fit: the device short of memory and the numbers, or the setting at fault. */
  model_plan_error: {
    device?: string;
    needed_bytes?: number;
    available_bytes?: number;
    context_per_slot?: number;
    slots?: number;
    key?: string;
  } & LlamaServerEnd &
    Open;
  /**
   * A bad request: the params field at fault, and why when the field alone does not say
   * (`session_not_found`, `model_not_vision`, `not_well_formed`…); a prompt that cannot fit
   * (`context_overflow`); a request line over the core's `stdio.max_line_bytes` (`line_too_long`,
   * its size and the limit).
   */
  invalid_request: {
    field?: string | null;
    supported?: number[];
    reason?: ErrorReason;
    line_bytes?: number;
    limit_bytes?: number;
    n_prompt_tokens?: number | null;
    n_ctx?: number;
    trace_id?: string;
  } & Open;
  unknown_method: Open;
  invalid_json: Open;
  /**
   * A `response_format` chat whose answer is not JSON matching the schema (it fails closed):
   * what the model wrote, its first 20 problems (a JSON pointer into the answer, "" for the
   * whole, cut at 200 characters, and what is wrong) and how many there were, and llama-server's
   * finish reason (`length`: a limit cut it off).
   */
  output_invalid: {
    text: string;
    errors: { path: string; message: string }[];
    errors_total: number;
    finish_reason: string | null;
    trace_id?: string;
  } & Open;
  /**
   * Cancelled by the host, or by a deletion (`session_deleted`, `user_deleted`, `document_deleted`).
   * A `pull` stopped in its download: the file's bytes on disk and its size; a partial is kept
   * only when `bytes_done` is over 0.
   */
  cancelled: { reason?: ErrorReason; bytes_done?: number; total?: number } & Open;
  /** More requests in flight than the core holds: nothing was done; send it again later. */
  too_many_requests: { limit: number } & Open;
  /** Unexpected, or llama-server failing during a chat (`reason`, docs/agent.md). */
  internal_error: { reason?: ErrorReason; trace_id?: string } & LlamaServerEnd & Open;
  /** The client's own: the core process ended or could not start. */
  core_exited: {
    exit_code: number | null;
    signal: string | null;
    /** Set when the process could not be started at all (ENOENT, EACCES…). */
    spawn_error?: string;
    /** The last lines the core wrote to stderr. */
    stderr_tail: string[];
  } & Open;
  timeout: Open;
  protocol_error: Open;
  client_closed: Open;
  /** The client's own: the request was not sent, the core's input holding this many bytes. */
  core_backlog: { queued_bytes: number; limit_bytes: number } & Open;
}
