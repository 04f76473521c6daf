import type { Database } from "bun:sqlite";
import { allOf, likePattern, words } from "./fts-query.ts";

/** One `sessions.search` hit: the message, its session's title, the matched words in `**`. */
export interface SearchHit {
  session_id: string;
  seq: number;
  title: string;
  snippet: string;
}

const SNIPPET_WORDS = 12;
const LIKE_SNIPPET_CHARS = 80;

/**
 * Full-text search over one user's messages (their own words and the answers; tool traffic
 * is not searched), best first by bm25. Without FTS5, a LIKE match of every word, newest first.
 */
export function searchSessions(
  db: Database,
  fts: boolean,
  userId: string,
  query: string,
  limit: number,
): SearchHit[] {
  return fts ? ftsSearch(db, userId, query, limit) : likeSearch(db, userId, query, limit);
}

function ftsSearch(db: Database, userId: string, query: string, limit: number): SearchHit[] {
  const match = allOf(query);
  if (!match) return [];
  return db
    .query(
      `SELECT m.session_id, m.seq, s.title,
         snippet(messages_fts, 0, '**', '**', '…', ${SNIPPET_WORDS}) AS snippet
       FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
       JOIN sessions s ON s.user_id = m.user_id AND s.session_id = m.session_id
       WHERE messages_fts MATCH $q AND m.user_id = $u
       ORDER BY bm25(messages_fts) LIMIT $n`,
    )
    .all({ q: match, u: userId, n: limit }) as SearchHit[];
}

function likeSearch(db: Database, userId: string, query: string, limit: number): SearchHit[] {
  const w = words(query).slice(0, 8);
  if (w.length === 0) return [];
  const params: Record<string, string | number> = { u: userId, n: limit };
  w.forEach((t, i) => {
    params[`w${i}`] = likePattern(t);
  });
  const rows = db
    .query(
      `SELECT m.session_id, m.seq, s.title, m.content FROM messages m
       JOIN sessions s ON s.user_id = m.user_id AND s.session_id = m.session_id
       WHERE m.user_id = $u AND m.role IN ('user', 'assistant')
         AND ${w.map((_, i) => `m.content LIKE $w${i} ESCAPE '\\'`).join(" AND ")}
       ORDER BY m.created_at DESC, m.seq DESC LIMIT $n`,
    )
    .all(params) as (Omit<SearchHit, "snippet"> & { content: string })[];
  return rows.map(({ content, ...hit }) => ({ ...hit, snippet: likeSnippet(content, w[0] as string) }));
}

/** The text around the first match of `word`, the match marked as FTS5's snippet() marks it. */
export function likeSnippet(text: string, word: string): string {
  const at = text.toLowerCase().indexOf(word);
  if (at < 0) return text.slice(0, LIKE_SNIPPET_CHARS);
  const from = Math.max(0, at - LIKE_SNIPPET_CHARS / 2);
  const to = Math.min(text.length, at + word.length + LIKE_SNIPPET_CHARS / 2);
  const mark = `${text.slice(from, at)}**${text.slice(at, at + word.length)}**${text.slice(at + word.length, to)}`;
  return `${from > 0 ? "…" : ""}${mark.replace(/\s+/g, " ")}${to < text.length ? "…" : ""}`;
}
