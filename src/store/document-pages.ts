import type { Database } from "bun:sqlite";
import type { z } from "zod";
import type { DocumentFormat, DocumentSummarySchema } from "../protocol/documents.ts";
import { boundedRows } from "./bounded-rows.ts";
import { decodeCursor, encodeCursor, FIRST_PAGE } from "./page-cursor.ts";
import { PAGE_BYTES } from "./session-pages.ts";

/** A document as `documents.list` shows it. */
export type DocumentSummary = z.infer<typeof DocumentSummarySchema>;

/** `documents.list`'s page: newest first, and the cursor for the next page (null at the end). */
export interface DocumentPage {
  documents: DocumentSummary[];
  next: string | null;
}

/**
 * What a call without `limit` may take: the whole list, as the SPEC answers it, up to this much
 * JSON (about 80,000 documents), under the 32 MiB lines the typed client reads; `next` past it.
 */
export const WHOLE_LIST_BYTES = 16 * 1024 * 1024;

/** Which page: a session's attachments (else the whole library), at most `limit` (none: all), after `before`. */
export interface DocumentPageAsk {
  sessionId?: string | undefined;
  limit?: number | undefined;
  before?: string | undefined;
  /** The most bytes of JSON a page takes past its first document (PAGE_BYTES; tests use less). */
  budget?: number | undefined;
}

export interface DocumentRow {
  document_id: string;
  name: string;
  format: DocumentFormat;
  chunks: number;
  bytes: number;
  session_id: string;
  created_at: number;
}

export const DOCUMENT_COLUMNS = "document_id, name, format, chunks, bytes, session_id, created_at";

/**
 * A page's rows, newest first, after the cursor's (time, id). Each a range of an index
 * (`documents_by_time` for the library, `documents_by_user` for a session; an index of a
 * WITHOUT ROWID table ends with its key, `document_id`), so a page reads its own rows and never
 * sorts or scans the rest of a library of any size.
 */
export function documentPageSql(inSession: boolean): string {
  return `SELECT ${DOCUMENT_COLUMNS} FROM documents
    WHERE user_id = $u ${inSession ? "AND session_id = $s" : ""} AND (created_at, document_id) < ($at, $id)
    ORDER BY created_at DESC, document_id DESC LIMIT $n`;
}

/**
 * The user's documents, newest first (a session's attachments, or all of them): at most `limit`
 * (all without) and, past the first, no more than the budget's bytes of JSON, so a short page
 * with `next` is normal. Rows are read one at a time, each measured as written.
 */
export function listDocuments(db: Database, userId: string, ask: DocumentPageAsk): DocumentPage {
  const [at, id] = ask.before !== undefined ? decodeCursor(ask.before, "documents.list") : FIRST_PAGE;
  const budget = ask.budget ?? (ask.limit === undefined ? WHOLE_LIST_BYTES : PAGE_BYTES);
  const limit = ask.limit ?? Number.POSITIVE_INFINITY;
  const rows = db.query(documentPageSql(ask.sessionId !== undefined)).iterate({
    u: userId,
    ...(ask.sessionId !== undefined ? { s: ask.sessionId } : {}),
    at,
    id,
    // SQLite's LIMIT -1: no limit.
    n: ask.limit === undefined ? -1 : ask.limit + 1,
  }) as IterableIterator<DocumentRow>;
  const { items: documents, last, more } = boundedRows(rows, limit, budget, documentSummary);
  return { documents, next: more && last ? encodeCursor(last.created_at, last.document_id) : null };
}

export function documentSummary(row: DocumentRow): DocumentSummary {
  return {
    document_id: row.document_id,
    name: row.name,
    format: row.format,
    chunks: row.chunks,
    bytes: row.bytes,
    session_id: row.session_id === "" ? null : row.session_id,
    created_at: new Date(row.created_at).toISOString(),
  };
}
