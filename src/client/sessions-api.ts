import type { Request } from "./documents-api.ts";
import type { CallOptions } from "./host-types.ts";
import type {
  SessionsAttachmentParams,
  SessionsAttachmentResult,
  SessionsDeleteParams,
  SessionsDeleteResult,
  SessionsExportParams,
  SessionsExportResult,
  SessionsGetParams,
  SessionsGetResult,
  SessionsListParams,
  SessionsListResult,
  SessionsRenameParams,
  SessionsRenameResult,
  SessionsSearchParams,
  SessionsSearchResult,
  UsersDeleteParams,
  UsersDeleteResult,
} from "./protocol-types.ts";

/**
 * The host's view of its conversations (docs/protocol.md#conversations-sessions-and-usersdelete):
 * `client.sessions.list()` … Each call is one request; an unknown session rejects with
 * `invalid_request`, `data.reason` `session_not_found`.
 */
export class SessionsApi {
  constructor(
    private readonly request: Request,
    /** A short call the core can cancel: an abort or the time limit stops its work there too. */
    private readonly cancellable: Request = request,
  ) {}

  /** The user's sessions, newest first; pass the result's `next` as `before` for the next page. */
  list(params: SessionsListParams = {}, options?: CallOptions): Promise<SessionsListResult> {
    return this.request("sessions.list", params, options);
  }

  /** One session and its newest messages; `before_seq` pages back. */
  get(params: SessionsGetParams, options?: CallOptions): Promise<SessionsGetResult> {
    return this.request("sessions.get", params, options);
  }

  rename(params: SessionsRenameParams, options?: CallOptions): Promise<SessionsRenameResult> {
    return this.request("sessions.rename", params, options);
  }

  /** Erases the session for good (its messages, memory and saved state). */
  delete(params: SessionsDeleteParams, options?: CallOptions): Promise<SessionsDeleteResult> {
    return this.request("sessions.delete", params, options);
  }

  /** Full-text search over the user's messages; an abort or the time limit cancels it on the core's side. */
  search(params: SessionsSearchParams, options?: CallOptions): Promise<SessionsSearchResult> {
    return this.cancellable("sessions.search", params, options);
  }

  /** The session as Markdown or JSON text. */
  export(params: SessionsExportParams, options?: CallOptions): Promise<SessionsExportResult> {
    return this.request("sessions.export", params, options);
  }

  /** One image of the user's messages (an id from `get`'s `attachments`): its type, size and base64 bytes. */
  attachment(params: SessionsAttachmentParams, options?: CallOptions): Promise<SessionsAttachmentResult> {
    return this.request("sessions.attachment", params, options);
  }
}

export class UsersApi {
  constructor(private readonly request: Request) {}

  /** Erases everything of the user for good, leaving none of it readable on disk. */
  delete(params: UsersDeleteParams, options?: CallOptions): Promise<UsersDeleteResult> {
    return this.request("users.delete", params, options);
  }
}
