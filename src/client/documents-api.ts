import type { CallOptions } from "./host-types.ts";
import type {
  DocumentsAddEvent,
  DocumentsAddParams,
  DocumentsAddResult,
  DocumentsDeleteParams,
  DocumentsDeleteResult,
  DocumentsListParams,
  DocumentsListResult,
} from "./protocol-types.ts";
import type { RequestStream } from "./request-stream.ts";

/** A short call: the client's own `request`. */
export type Request = <R>(
  method: string,
  params: Record<string, unknown>,
  options?: CallOptions,
) => Promise<R>;
/** A cancellable request whose events stream (the client's connection). */
export type Open = <E, R>(
  method: string,
  params: Record<string, unknown>,
  options: CallOptions,
) => RequestStream<E, R>;

/**
 * Documents handed to the assistant (docs/protocol.md "Documents"): `client.documents.add()` …
 * A session's attachments (with `session_id`) or the user's library (without).
 */
export class DocumentsApi {
  constructor(
    private readonly request: Request,
    private readonly open: Open,
  ) {}

  /**
   * Reads a file (`path`) or `text` into the assistant's memory; `index_progress` events while it
   * runs. Cancellable: a cancelled add leaves nothing behind.
   */
  add(
    params: DocumentsAddParams,
    options: CallOptions = {},
  ): RequestStream<DocumentsAddEvent, DocumentsAddResult> {
    return this.open("documents.add", params, options);
  }

  /**
   * The user's documents, newest first: all of them (up to 16 MiB of answer, `next` past it),
   * or with `limit` (up to 500) a page; pass the result's `next` as `before` for the next page.
   * With `session_id`, that session's attachments only.
   */
  list(params: DocumentsListParams = {}, options?: CallOptions): Promise<DocumentsListResult> {
    return this.request("documents.list", params, options);
  }

  /** Erases the document and its chunks for good. */
  delete(params: DocumentsDeleteParams, options?: CallOptions): Promise<DocumentsDeleteResult> {
    return this.request("documents.delete", params, options);
  }
}
