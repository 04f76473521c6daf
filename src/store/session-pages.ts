import type { Database } from "bun:sqlite";
import type { AttachmentRef } from "../protocol/chat-message.ts";
import { Attachments } from "./attachments.ts";
import { boundedRows } from "./bounded-rows.ts";
import { type SessionSummary, type StoredMessage, storedMessage, summaryOf } from "./message-rows.ts";
import { decodeCursor, encodeCursor, FIRST_PAGE } from "./page-cursor.ts";
import { named } from "./source-names.ts";

/** `sessions.list`'s page: newest first, and the cursor for the next page (null at the end). */
export interface SessionPage {
  sessions: SessionSummary[];
  next: string | null;
}

/** `sessions.get`'s page: the newest `limit` messages before `before_seq`, oldest first. */
export interface MessagePage {
  session: SessionSummary;
  messages: StoredMessage[];
  has_more: boolean;
}

export function listSessions(db: Database, userId: string, limit: number, before?: string): SessionPage {
  const [at, id] = before !== undefined ? decodeCursor(before, "sessions.list") : FIRST_PAGE;
  const rows = db
    .query(
      `SELECT session_id, title, agent, created_at, updated_at, message_count, preview FROM sessions
       WHERE user_id = $u AND (updated_at < $at OR (updated_at = $at AND session_id < $id))
         AND (message_count > 0 OR EXISTS (SELECT 1 FROM checkpoints c
              WHERE c.user_id = sessions.user_id AND c.session_id = sessions.session_id))
       ORDER BY updated_at DESC, session_id DESC LIMIT $n`,
    )
    .all({ u: userId, at, id, n: limit + 1 }) as Parameters<typeof summaryOf>[0][];
  const page = rows.slice(0, limit);
  const last = page[page.length - 1];
  return {
    sessions: page.map(summaryOf),
    next: rows.length > limit && last ? encodeCursor(last.updated_at, last.session_id) : null,
  };
}

/**
 * The most a `sessions.get` page's messages take as JSON. The typed client reads lines of up to
 * 32 MiB (client-options.ts `maxLineBytes`) and a line over it is lost whole, so a page stops
 * before the message that would take it past this, well under that; a message bigger than this
 * alone (at most about `stdio.max_line_bytes`, 8 MiB by default: no input line is longer, tool
 * results are cut far shorter, a model's reply is llama/completion.ts MAX_REPLY_CHARS at most)
 * still goes out, as a page of its own.
 */
export const PAGE_BYTES = 8 * 1024 * 1024;

/**
 * `sessions.get`'s page from one snapshot of the database: the session `find` reads, its messages
 * and their images in one read transaction. Read in separate statements, an edit or a delete
 * committed between them by another connection (the store's thread, another core) showed a
 * summary from before it over messages from after it.
 */
export function sessionPage(
  db: Database,
  find: () => SessionSummary,
  userId: string,
  limit: number,
  beforeSeq?: number,
): MessagePage {
  return db.transaction(() => sessionMessages(db, find(), userId, limit, beforeSeq)).deferred();
}

/**
 * The newest messages before `beforeSeq`, oldest first: at most `limit` of them and, past the
 * first, no more than `budget` bytes of JSON, so a short page with `has_more` is normal.
 */
export function sessionMessages(
  db: Database,
  session: SessionSummary,
  userId: string,
  limit: number,
  beforeSeq?: number,
  budget = PAGE_BYTES,
): MessagePage {
  const { messages, more } = readPage(db, session, userId, "older", beforeSeq ?? Number.MAX_SAFE_INTEGER, {
    limit,
    budget,
  });
  return { session, messages: messages.reverse(), has_more: more };
}

/** The oldest messages from `fromSeq` on, oldest first, as `sessionMessages` bounds them: an export's slice. */
export function messagesFrom(
  db: Database,
  session: SessionSummary,
  userId: string,
  fromSeq: number,
  budget: number,
): { messages: StoredMessage[]; more: boolean } {
  return readPage(db, session, userId, "newer", fromSeq, { limit: Number.MAX_SAFE_INTEGER - 1, budget });
}

/**
 * Rows read one at a time (seq below `seq` going back, or from `seq` on), each measured as the
 * JSON it is written as, so a page never holds much more than its budget. The core's own requests
 * to write again are not read (agent/write-again.ts): they are not the user's words, so a page's
 * seqs may skip.
 */
function readPage(
  db: Database,
  session: SessionSummary,
  userId: string,
  way: "older" | "newer",
  seq: number,
  bound: { limit: number; budget: number },
): { messages: StoredMessage[]; more: boolean } {
  const rows = db
    .query(
      `SELECT seq, role, content, reasoning, tool_calls, tool_call_id, usage, created_at, sources FROM messages
       WHERE user_id = $u AND session_id = $s AND by_core = 0 AND ${way === "older" ? "seq < $seq ORDER BY seq DESC" : "seq >= $seq ORDER BY seq"}
       LIMIT $n`,
    )
    .iterate({ u: userId, s: session.session_id, seq, n: bound.limit + 1 }) as IterableIterator<
    Parameters<typeof storedMessage>[0]
  >;
  const images = imagesBySeq(new Attachments(db), userId, session.session_id, way);
  const names = new Map<string, string>();
  const { items: messages, more } = boundedRows(rows, bound.limit, bound.budget, (row) => {
    const m = storedMessage(row, images(row.seq));
    // An answer's sources, named as they are now (store/source-names.ts).
    if (row.sources) m.sources = named(db, userId, JSON.parse(row.sources), names);
    return m;
  });
  return { messages, more };
}

/** Seqs whose images one query fetches: rows are read one at a time, their images not. */
const IMAGE_WINDOW = 256;

/** A message's images by its seq, fetched a window of seqs at a time in the direction read. */
function imagesBySeq(
  attachments: Attachments,
  userId: string,
  sessionId: string,
  way: "older" | "newer",
): (seq: number) => AttachmentRef[] | undefined {
  let from = 0;
  let to = 0;
  let refs = new Map<number, AttachmentRef[]>();
  return (seq) => {
    if (seq < from || seq >= to) {
      from = way === "older" ? Math.max(0, seq - IMAGE_WINDOW + 1) : seq;
      to = from + IMAGE_WINDOW;
      refs = attachments.refsBySeq(userId, sessionId, from, to);
    }
    return refs.get(seq);
  };
}

/**
 * The session's latest text `sessions.list` previews (the user's or an answer's), "" for none:
 * an edit whose own turn has none to show (images alone, an empty answer) previews this, never
 * the replaced tail it erased.
 */
export function latestShownText(db: Database, userId: string, sessionId: string): string {
  const row = db
    .query(
      `SELECT content FROM messages WHERE user_id = ? AND session_id = ? AND by_core = 0
       AND role IN ('user', 'assistant') AND content != '' ORDER BY seq DESC LIMIT 1`,
    )
    .get(userId, sessionId) as { content: string } | null;
  return row?.content ?? "";
}
