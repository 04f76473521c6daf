import { z } from "zod";
import { windowsDevicePath } from "../util/device-path.ts";
import { isFullPath } from "../util/full-path.ts";
import { isOneLine } from "../util/one-line.ts";
import { AttachmentRefSchema, ToolCallSchema } from "./chat-message.ts";
import { SafeIdSchema } from "./safe-id.ts";
import { SourceSchema } from "./sources.ts";
import { UsageSchema } from "./usage.ts";
import { userParams as params, UserIdSchema as UserId } from "./user-params.ts";

/**
 * The host's view of its conversations (docs/protocol.md#conversations-sessions-and-usersdelete):
 * `sessions.list`, `sessions.get`, `sessions.rename`, `sessions.delete`, `sessions.search`,
 * `sessions.export` and `users.delete`. Every one takes `user_id` (default `default_user`) and sees
 * only that user's sessions; a session the user does not have is `invalid_request` with
 * `data.reason` `session_not_found`.
 */

/** A page size: 1 to `max`, so neither 0 nor a billion rows is a valid ask. */
const limit = (fallback: number, max: number) =>
  z.number().int().min(1, `must be 1-${max}`).max(max, `must be 1-${max}`).default(fallback);

export const SessionSummarySchema = z.object({
  session_id: z.string(),
  /** The first user message cut at a word near 60 characters, until renamed. */
  title: z.string(),
  /** The agent of the session's latest turn. */
  agent: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  message_count: z.number().int().nonnegative(),
  /** The latest message with text, on one line, cut near 120 characters. */
  preview: z.string(),
});

export const StoredMessageSchema = z.object({
  /** The message's place in its session, from 0; `replace_from` and `before_seq` name it. */
  seq: z.number().int().nonnegative(),
  role: z.enum(["user", "assistant", "tool", "system"]),
  content: z.string().nullable(),
  /** A user message's images (docs/protocol.md#images); `sessions.attachment` gives the bytes. */
  attachments: z.array(AttachmentRefSchema).optional(),
  /** The model's thinking before this message (reasoning models). */
  reasoning: z.string().optional(),
  tool_calls: z.array(ToolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  created_at: z.string(),
  /** The token counts and timings of the step that wrote it (assistant messages). */
  usage: UsageSchema.optional(),
  /** An answer's citations: what memory recalled for its turn (docs/protocol.md "Citations"). */
  sources: z.array(SourceSchema).optional(),
});

export const SessionsListParamsSchema = params({
  user_id: UserId,
  limit: limit(50, 500),
  /** `next` of the previous page. */
  before: z.string().min(1).max(200).optional(),
});
export const SessionsListResultSchema = z.object({
  sessions: z.array(SessionSummarySchema),
  /** The cursor for the next page (`before`), or null at the last one. */
  next: z.string().nullable(),
});

export const SessionsGetParamsSchema = params({
  user_id: UserId,
  session_id: SafeIdSchema,
  limit: limit(200, 1000),
  /** Only messages before this seq: the page before the one shown. */
  before_seq: z.number().int().nonnegative().optional(),
});
export const SessionsGetResultSchema = z.object({
  session: SessionSummarySchema,
  /**
   * Oldest first: the newest messages before `before_seq`, at most `limit` and at most 8 MiB of
   * JSON past the first (a bigger message comes alone), so a page shorter than `limit` is normal.
   */
  messages: z.array(StoredMessageSchema),
  /** Older messages exist (a short page too): ask again with `before_seq` = the first seq here. */
  has_more: z.boolean(),
});

/** A character that shows: neither white space nor an invisible format character. */
const VISIBLE = /[^\s\p{Cf}]/u;
export const SessionsRenameParamsSchema = params({
  user_id: UserId,
  session_id: SafeIdSchema,
  /**
   * One line as a list shows it: no control characters (NUL, tabs, newlines…), no line or
   * paragraph separators and no bidirectional overrides or isolates (U+202A-E, U+2066-9), which
   * would reorder the text after it on the host's screen; spaces of any kind are fine, but not
   * alone (nor with invisible format characters, U+200B, U+FEFF…): a list would show a blank row.
   */
  title: z
    .string()
    .min(1)
    .max(500)
    .refine(
      (t) => isOneLine(t),
      "must be one line of text: no control characters, line breaks or bidirectional overrides",
    )
    .refine((t) => VISIBLE.test(t), "must have a character other than spaces"),
});
export const SessionsRenameResultSchema = z.object({ session: SessionSummarySchema });

export const SessionsDeleteParamsSchema = params({ user_id: UserId, session_id: SafeIdSchema });
/** What an erase did with each database set aside after damage (`local-ai.db.corrupt-<time>`). */
export const SetAsideCopySchema = z.discriminatedUnion("outcome", [
  /** Passed its integrity check: the rows erased from it as from the live database. */
  z.object({
    path: z.string(),
    outcome: z.literal("scrubbed"),
    deleted_sessions: z.number().int().nonnegative(),
  }),
  /** Could not be scrubbed (damaged, unreadable): overwritten and removed whole, and why. */
  z.object({ path: z.string(), outcome: z.literal("removed"), problem: z.string() }),
]);
export const SessionsDeleteResultSchema = z.object({
  deleted: z.literal(true),
  set_aside_copies: z.array(SetAsideCopySchema),
});

export const SessionsSearchParamsSchema = params({
  user_id: UserId,
  query: z.string().min(1).max(1000),
  limit: limit(20, 100),
});
export const SearchHitSchema = z.object({
  session_id: z.string(),
  seq: z.number().int().nonnegative(),
  title: z.string(),
  /** The text around the match on one line, the matched words in `**`. */
  snippet: z.string(),
});
export const SessionsSearchResultSchema = z.object({ hits: z.array(SearchHitSchema) });

export const SessionsExportParamsSchema = params({
  user_id: UserId,
  session_id: SafeIdSchema,
  format: z.enum(["markdown", "json"]),
  /**
   * Write the export to this file (absolute; its folder must exist) instead of answering it:
   * owner-only, replaced atomically. Needed for an export over 8 MiB, which no answer carries.
   */
  path: z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => isFullPath(p), "must be an absolute path")
    .refine(
      (p) => windowsDevicePath(p) === null,
      "must name a file, not a Windows device or pipe (\\\\.\\…, NUL, COM1…)",
    )
    .refine((p) => !p.includes("\0"), "must not contain a NUL character")
    .optional(),
});
export const SessionsExportResultSchema = z.object({
  format: z.enum(["markdown", "json"]),
  /** The export, when no `path` was given. */
  content: z.string().optional(),
  /** Where it was written, with `path`. */
  path: z.string().optional(),
  /** Its size in bytes, with `path`. */
  bytes: z.number().int().nonnegative().optional(),
});

export const SessionsAttachmentParamsSchema = params({
  user_id: UserId,
  /** An id from a message's `attachments` in `sessions.get`. */
  id: z.number().int().positive(),
});
export const SessionsAttachmentResultSchema = z.object({
  id: z.number().int().positive(),
  mime: z.string(),
  bytes: z.number().int().nonnegative(),
  /** The image's bytes, base64. */
  data: z.string(),
});

export const UsersDeleteParamsSchema = params({ user_id: UserId });
export const UsersDeleteResultSchema = z.object({
  /** How many sessions were erased (0 for a user with none: not an error). */
  deleted_sessions: z.number().int().nonnegative(),
  set_aside_copies: z.array(SetAsideCopySchema),
});
