import { z } from "zod";
import { SafeIdSchema } from "./safe-id.ts";
import { UserIdSchema as UserId, userParams } from "./user-params.ts";

/**
 * The documents' wire pieces (docs/agent.md "Documents"): the format and `index_progress`, and
 * the params and results of `documents.add`, `documents.list` and `documents.delete`.
 */

/** What a document was read as: from its bytes, the name deciding only Markdown over text. */
export const DocumentFormatSchema = z.enum(["text", "markdown", "html", "pdf"]);
export type DocumentFormat = z.infer<typeof DocumentFormatSchema>;

/** How a text document's bytes were decoded (a PDF's text is pdf.js's). */
export const TextEncodingSchema = z.enum(["utf-8", "utf-16le", "utf-16be", "latin-1"]);
export type TextEncoding = z.infer<typeof TextEncodingSchema>;

/**
 * `index_progress`: `reading` counts a PDF's pages or the characters of a text read into
 * blocks, `indexing` the characters chunked (and later stored), `embedding` the chunks embedded.
 */
export const IndexProgressSchema = z.object({
  phase: z.enum(["reading", "indexing", "embedding"]),
  done: z.number().int().nonnegative(),
  total: z.number().int().nonnegative(),
});
export type IndexProgress = z.infer<typeof IndexProgressSchema>;

/**
 * `documents.add` (docs/protocol.md "Documents"): exactly one of `path` (a file the core reads)
 * and `text`; with `session_id` (an existing session of the user) the document is that
 * session's attachment, without it part of the user's library.
 */
export const DocumentsAddParamsSchema = userParams({
  user_id: UserId,
  session_id: SafeIdSchema.optional(),
  path: z.string().min(1).max(4096).optional(),
  text: z.string().min(1).optional(),
  /** Shown in lists and citations; omitted: the file's name, or the text's first words. */
  name: z.string().min(1).max(500).optional(),
}).superRefine((p, ctx) => {
  if ((p.path === undefined) === (p.text === undefined))
    ctx.addIssue({ code: "custom", path: ["path"], message: "give exactly one of path and text" });
});
export type DocumentsAddParams = z.output<typeof DocumentsAddParamsSchema>;

export const DocumentsAddResultSchema = z.object({
  document_id: z.string(),
  name: z.string(),
  format: DocumentFormatSchema,
  chunks: z.number().int().positive(),
  /** The file's size, or the text's UTF-8 bytes. */
  bytes: z.number().int().nonnegative(),
});

export const DocumentsAddEventFields = { index_progress: IndexProgressSchema } as const;

export const DocumentSummarySchema = z.object({
  document_id: z.string(),
  name: z.string(),
  format: DocumentFormatSchema,
  chunks: z.number().int().nonnegative(),
  bytes: z.number().int().nonnegative(),
  /** The session it is attached to; null for the user's library. */
  session_id: z.string().nullable(),
  created_at: z.string(),
});

/**
 * Without `session_id`: the user's documents; with it: that session's attachments. Without
 * `limit`, all of them, as the SPEC's `documents.list` answers (bounded by bytes only, with `next`
 * past them); with it, a page at a time, as `sessions.list`.
 */
export const DocumentsListParamsSchema = userParams({
  user_id: UserId,
  session_id: SafeIdSchema.optional(),
  limit: z.number().int().min(1, "must be 1-500").max(500, "must be 1-500").optional(),
  /** `next` of the previous page. */
  before: z.string().min(1).max(200).optional(),
});
export const DocumentsListResultSchema = z.object({
  /**
   * Newest first: at most `limit`, and at most 8 MiB of JSON past the first (16 MiB without
   * `limit`), so a page shorter than `limit` is normal.
   */
  documents: z.array(DocumentSummarySchema),
  /** The cursor for the next page (`before`), or null at the last one. */
  next: z.string().nullable(),
});

export const DocumentsDeleteParamsSchema = userParams({ user_id: UserId, document_id: SafeIdSchema });
export const DocumentsDeleteResultSchema = z.object({ deleted: z.literal(true) });
