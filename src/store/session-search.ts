import type { Database } from "bun:sqlite";
import { CoreError } from "../protocol/errors.ts";
import { escapeRegExp } from "../util/escape-regexp.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import { editedSince } from "./erasures.ts";
import { allOf, likeCasings, likePattern, UNSPACED, words } from "./fts-query.ts";
import { FOLDED } from "./title.ts";

/** One `sessions.search` hit: the message, its session's title, the matched words in `**`. */
export interface SearchHit {
  session_id: string;
  seq: number;
  title: string;
  snippet: string;
}

const SNIPPET_CHARS = 100;
/**
 * How much of a hit's message a snippet is looked for in: the first 32K characters, taken from
 * SQLite with substr(), so a search of 100 hits in 2 MB messages never puts 200 MB through JS
 * regexes (4-5 s of a blocked loop, 1 GB of memory, measured). A match further in gets the
 * message's start as its snippet, unmarked. FTS5's snippet() is not used: it re-reads and
 * tokenizes each whole message in the same loop, unbounded too.
 */
export const SNIPPET_SCAN_CHARS = 32 * 1024;
/**
 * Matches ranked by bm25(), the newest first: FTS5 scores every match before it can order
 * them, so a search for common words over years of chats ranks the most recent matches only.
 */
const RANKED_MATCHES = 500;

/**
 * Full-text search over one user's messages (their own words and the answers; tool traffic and
 * the core's requests to write again are not searched), best first by bm25. Without FTS5, or with a
 * word of an unspaced script, a LIKE match of every word, newest first.
 */
export function searchSessions(
  db: Database,
  fts: boolean,
  userId: string,
  query: string,
  limit: number,
  stopped: Stopped = () => false,
): SearchHit[] {
  // Cancelled while it waited behind another search on the thread: nothing is read.
  if (stopped()) throw searchCancelled();
  const indexed = fts && !queryWords(query).some((w) => UNSPACED.test(w));
  const ask = { userId, query, limit, stopped };
  return indexed ? ftsSearch(db, ask) : likeSearch(db, ask);
}

/** One search as the two matches take it. */
interface SearchAsk {
  userId: string;
  query: string;
  limit: number;
  stopped: Stopped;
}

/** Whether the search was cancelled since it was asked (a flag the main loop sets: store/chunk-thread.ts). */
export type Stopped = () => boolean;

const searchCancelled = () => new CoreError("cancelled", "cancelled by the host");

/** The query's words, one character of an unspaced script among them: alone, it is often a word (`猫`, cat). */
const queryWords = (query: string) => words(query, UNSPACED);

function ftsSearch(db: Database, ask: SearchAsk): SearchHit[] {
  const { userId, query, limit, stopped } = ask;
  const match = allOf(query);
  if (!match) return [];
  const ranked = db
    .query(
      `SELECT messages_fts.rowid AS id, bm25(messages_fts) AS score
       FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
       WHERE messages_fts MATCH $q AND m.user_id = $u AND m.by_core = 0
       ORDER BY messages_fts.rowid DESC LIMIT $cap`,
    )
    .all({ q: match, u: userId, cap: RANKED_MATCHES }) as { id: number; score: number }[];
  const best = ranked.sort((a, b) => a.score - b.score || b.id - a.id).slice(0, limit);
  const hit = db.query(
    `SELECT m.session_id, m.seq, s.title, substr(m.content, 1, ${SNIPPET_SCAN_CHARS + 1}) AS content
     FROM messages m JOIN sessions s ON s.user_id = m.user_id AND s.session_id = m.session_id
     WHERE m.id = ? AND m.user_id = ? AND m.role IN ('user', 'assistant') AND m.by_core = 0`,
  );
  const w = words(query);
  const hits: SearchHit[] = [];
  for (const b of best) {
    if (stopped()) throw searchCancelled();
    // Erased since the ranking read it (an erase commits on the store's other thread): left out.
    // Read as this user's words again: SQLite gives the newest id anew, maybe to another user's
    // message or to this user's tool traffic, which is not searched.
    const row = hit.get(b.id, userId) as (Omit<SearchHit, "snippet"> & { content: string }) | null;
    if (!row) continue;
    const { content, ...rest } = row;
    hits.push({ ...rest, snippet: markedSnippet(content, w) });
  }
  return hits;
}

/**
 * How many of the user's messages, newest first, the LIKE match reads between two looks at
 * whether its search was cancelled (`stopped`): each may be megabytes matched in full.
 */
export const LIKE_PAGE_ROWS = 128;

/** A position in the user's messages newest first, as the `messages_newest` index orders them. */
type Cursor = { c: number; s: number; i: number };
const NEWEST: Cursor = { c: Number.MAX_SAFE_INTEGER, s: Number.MAX_SAFE_INTEGER, i: Number.MAX_SAFE_INTEGER };

function likeSearch(db: Database, ask: SearchAsk): SearchHit[] {
  const { userId, query, limit, stopped } = ask;
  const w = queryWords(query).slice(0, 8);
  if (w.length === 0) return [];
  const params: Record<string, string | number> = {};
  // Each word in any of its casings: SQLite's LIKE folds ASCII only.
  const matches = w.map((t, i) =>
    likeCasings(t).map((c, j) => {
      params[`w${i}_${j}`] = likePattern(c);
      return `m.content LIKE $w${i}_${j} ESCAPE '\\'`;
    }),
  );
  // A page's far end: the LIKE_PAGE_ROWS-th message after `from`, none on the last page.
  const pageEnd = db.query(
    `SELECT created_at AS c, seq AS s, id AS i FROM messages WHERE user_id = $u AND (created_at, seq, id) < ($c, $s, $i)
     ORDER BY created_at DESC, seq DESC, id DESC LIMIT 1 OFFSET ${LIKE_PAGE_ROWS - 1}`,
  );
  const inPage = (last: boolean) =>
    db.query(
      `SELECT m.session_id, m.seq, s.title, substr(m.content, 1, ${SNIPPET_SCAN_CHARS + 1}) AS content
       FROM messages m JOIN sessions s ON s.user_id = m.user_id AND s.session_id = m.session_id
       WHERE m.user_id = $u AND (m.created_at, m.seq, m.id) < ($c, $s, $i)
         ${last ? "" : "AND (m.created_at, m.seq, m.id) >= ($ec, $es, $ei)"}
         AND m.role IN ('user', 'assistant') AND m.by_core = 0
         AND ${matches.map((any) => `(${any.join(" OR ")})`).join(" AND ")}
       ORDER BY m.created_at DESC, m.seq DESC, m.id DESC LIMIT $n`,
    );
  // Newest first a page at a time, so a search stops once it has its hits (a common word over
  // years of chats reads one page) and a cancel is heard between pages.
  const rows: (Omit<SearchHit, "snippet"> & { content: string })[] = [];
  for (let from: Cursor | null = NEWEST; from && rows.length < limit; ) {
    if (stopped()) throw searchCancelled();
    const end = pageEnd.get({ u: userId, ...from }) as Cursor | null;
    const page = {
      u: userId,
      n: limit - rows.length,
      ...from,
      ...(end && { ec: end.c, es: end.s, ei: end.i }),
    };
    rows.push(...(inPage(!end).all({ ...params, ...page }) as typeof rows));
    from = end;
  }
  return rows.map(({ content, ...hit }) => ({ ...hit, snippet: markedSnippet(content, w) }));
}

/**
 * The text around the first of `words` found in the first SNIPPET_SCAN_CHARS of `text`, each
 * found word (or word start, for the one still being typed) marked `**word**`, on one line, cut
 * with "…" on the sides. Words found only with other accents (`résumé` for `resume`, which the
 * index matches) are not marked.
 */
export function markedSnippet(text: string, found: readonly string[]): string {
  const cut = text.length > SNIPPET_SCAN_CHARS;
  // Each cut between characters: half an emoji is a lone surrogate, no text (docs/protocol.md "Text").
  // On one line as a preview: white space alone left a NEL, an ESC and a bidi override in it.
  const flat = (cut ? text.slice(0, wholeCharCut(text, SNIPPET_SCAN_CHARS)) : text).replace(FOLDED, " ");
  // A word of an unspaced script is marked where it stands, itself only: its neighbours are not its letters.
  const alternatives = found.map((w) =>
    UNSPACED.test(w) ? escapeRegExp(w) : `(?<![\\p{L}\\p{N}\\p{M}])${escapeRegExp(w)}[\\p{L}\\p{N}\\p{M}]*`,
  );
  const pattern = new RegExp(alternatives.join("|"), "giu");
  const first = found.length > 0 ? flat.search(pattern) : -1;
  const from = first < 0 ? 0 : wholeCharCut(flat, Math.max(0, first - SNIPPET_CHARS / 2));
  const to = wholeCharCut(flat, Math.min(flat.length, from + SNIPPET_CHARS));
  const window =
    found.length > 0 ? flat.slice(from, to).replace(pattern, (m) => `**${m}**`) : flat.slice(from, to);
  return `${from > 0 ? "…" : ""}${window}${to < flat.length || cut ? "…" : ""}`;
}

/**
 * `hits` less those of a session erased since `mark`: the search thread reads a snapshot, and its
 * answer can come after a `sessions.delete` or `users.delete` sent later has answered. An edit's
 * erase of the session's tail (`replace_from`, `regenerate`) counts too: the snapshot's hits may be
 * of the replaced turns (their words in the snippet, the old title), and which seq it replaced
 * from is not kept, so the session is left out of this answer (a search sent again finds it).
 */
export function notErasedSince(db: Database, userId: string, hits: SearchHit[], mark: number): SearchHit[] {
  const gone = new Map<string, boolean>();
  return hits.filter((h) => {
    const erased = gone.get(h.session_id) ?? editedSince(db, userId, h.session_id, mark, true);
    gone.set(h.session_id, erased);
    return !erased;
  });
}
