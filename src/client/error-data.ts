import type { ErrorReason, SessionsDeleteResult } from "./protocol-types.ts";

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
  /** A start that failed the same way just before is not tried again until then (docs/supervisor.md). */
  next_try_at?: string;
  retry_in_ms?: number;
  /** Distributed inference (docs/distributed.md): the RPC workers it had, and those that stopped answering. */
  rpc_workers?: string[];
  rpc_workers_lost?: string[];
}

/**
 * The data folder or its database at fault (docs/protocol.md, `internal_error`): the setting
 * (`app.data_dir`), the folder or file, and the problem: an errno code (`ENOTDIR`, `EACCES`…),
 * SQLite's (`SQLITE_FULL`, `SQLITE_BUSY`…) or the store's own (`migrating`, `migration_failed`,
 * `thread_stopped`, `not_ours`…); `cause`, SQLite's code behind a `migration_failed`.
 * Also a file a request named when the open files are used up: `problem` `EMFILE` or `ENFILE` alone.
 */
interface DataDirFault {
  key?: string;
  path?: string;
  file?: string;
  problem?: string;
  cause?: string;
}

/**
 * What an erase of saved KV state left (docs/protocol.md, Conversations): the files it could not
 * remove (the first 100; `file` the first), how many there were, and the folder when the erase
 * failed part way over it (which of its files stayed cannot be told). Send the delete again.
 */
interface KvLeft {
  files?: string[];
  files_count?: number;
  folder?: string;
}

/** Why a `pull` failed, one word to switch on (docs/models.md). */
export type PullCause =
  | "offline"
  | "bad_endpoint"
  | "not_found"
  | "no_gguf"
  | "ambiguous"
  | "unauthorized"
  | "forbidden"
  | "hub_error"
  | "connection_lost"
  | "size_mismatch"
  | "checksum_mismatch"
  | "disk_full"
  | "cache_unwritable"
  | "bad_listing";

/** A `pull` that failed: the repo, file and revision, and why (`cause`; `http_status` of a hub error). */
interface PullFault {
  repo?: string;
  file?: string;
  revision?: string;
  quant?: string;
  cause?: PullCause;
  http_status?: number;
  /** A repo with no file that matches, or several: the first 100 of its GGUFs and quantizations, all counted. */
  available?: string[];
  available_count?: number;
  quantizations?: string[];
  quantizations_count?: number;
}

/** Why a configured vision projector cannot serve its model (docs/models.md#the-projector). */
export type ProjectorProblem = "absent" | "unreadable" | "not_projector" | "no_width" | "width_mismatch";

/** A device the models given overrun: what they need and its budget (docs/models.md). */
interface DeviceOverrun {
  device: string;
  needed_bytes: number;
  budget_bytes: number;
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
    /** An `hf:` model path that several cached files match: the first 100 of them, all counted. */
    matches?: string[];
    matches_count?: number;
  } & Open;
  /**
   * llama-server not found (the paths tried), or it exited at start-up over its binary; also
   * the client's resolveCoreBinary when local-ai is in none of its layouts (`tried`).
   */
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
      | "incomplete_split"
      | "hub_offline"
      | "hub_unreachable"
      | "hub_unauthorized"
      | "hub_not_found"
      | "hub_error"
      | "ambiguous";
    key?: string;
    field?: "model";
    pull?: string;
    /** An `hf:` model: its repo, revision, file, and the cache looked in. */
    repo?: string;
    revision?: string;
    file?: string;
    cache_dir?: string;
    /** `hub_not_found`: the repo's GGUFs (the first 100, all counted); `ambiguous`: the files that match. */
    available?: string[];
    available_count?: number;
    matches?: string[];
    matches_count?: number;
    /** Not in the cache and the hub's header not read either: the hub's problem (docs/models.md). */
    hub_problem?: string | null;
  } & LlamaServerEnd &
    Open;
  /**
   * The model does not fit: the device short of memory and the numbers, or the setting at fault;
   * a configured projector that cannot serve its model (`projector`, `problem`, the widths);
   * models that do not fit together (`models`, `devices`), or a load that waited in vain for
   * room (`model`, `holders`, `pinned`); RPC workers left out of the plan; GPU layers asked of no
   * usable GPU (`gpus`); a KV cache type whose block does not divide the head size.
   */
  model_plan_error: {
    device?: string;
    needed_bytes?: number;
    available_bytes?: number;
    context_per_slot?: number;
    slots?: number;
    key?: string;
    path?: string;
    architecture?: string;
    projector?: string;
    problem?: ProjectorProblem;
    projector_width?: number | null;
    model_width?: number | null;
    model?: string;
    models?: string[];
    devices?: DeviceOverrun[];
    holders?: string[];
    pinned?: string[];
    rpc_workers_left_out?: { endpoint: string; reason: string }[];
    /** `model.gpu_layers` over 0 with no GPU llama-server can use: how many GPUs were found. */
    gpus?: number;
    /** A `llama.cache_type_k/v` the model cannot take: the type, its block and the head size. */
    cache_type?: string;
    block_size?: number;
    head_size?: number;
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
    /**
     * What is wrong with an image (`images[i]`: `bad_base64`, `too_large`…), a document
     * (`encrypted`, `no_text`…), a stored image (`damaged`) or an export's `path` (an errno code).
     */
    problem?: string;
    /** `model_not_found`: the configured model names; `model_busy`: the model and its chats. */
    available?: string[];
    model?: string;
    chats?: number;
    /** A stored image that cannot be sent: its attachment ids. */
    attachments?: number[];
    /** `session_not_found`: copies of the session set aside in damaged databases. */
    set_aside_copies?: SessionsDeleteResult["set_aside_copies"];
    /** `model` given as an `hf:` reference: the setting it names, and the files that match. */
    key?: string;
    matches?: string[];
    matches_count?: number;
  } & PullFault &
    Open;
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
  cancelled: {
    reason?: ErrorReason;
    bytes_done?: number;
    total?: number;
    /** The session or document deleted under the request, or the one a cancelled add left. */
    session_id?: string;
    document_id?: string;
  } & DataDirFault &
    KvLeft &
    Open;
  /** More requests in flight than the core holds: nothing was done; send it again later. */
  too_many_requests: { limit: number } & Open;
  /** Unexpected, or llama-server failing during a chat (`reason`, docs/agent.md). */
  internal_error: {
    reason?: ErrorReason;
    trace_id?: string;
    /** llama-server's restarts used up (docs/supervisor.md). */
    restarts?: number;
    /** An MCP server that could not be started. */
    server?: string;
    /** `cause`: SQLite's code behind `migration_failed`, or a pull's cause (as `PullCause`). */
    cause?: string;
  } & LlamaServerEnd &
    DataDirFault &
    KvLeft &
    Omit<PullFault, "cause"> &
    Open;
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
