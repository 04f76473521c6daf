import type { Database } from "bun:sqlite";
import { join } from "node:path";
import type { Source } from "../protocol/sources.ts";
import { wholeCharCut } from "../util/text-cut.ts";
import { erasureMark } from "./erasures.ts";
import {
  anyOf,
  likeCasings,
  likePattern,
  likeWords,
  textBytes,
  UNSPACED,
  unspacedCounter,
  words,
} from "./fts-query.ts";
import { MemoryVectors, type QueryVector, type Scope } from "./memory-vectors.ts";
import { fuseRanks } from "./rank-fusion.ts";
import { named, sourceName, withoutName } from "./source-names.ts";
import { TermStats } from "./term-stats.ts";
import { ownerKey } from "./vector-index.ts";

/**
 * A remembered passage: a past turn (`session:<id>`), a chunk of a file (`file:<path>`) or of a
 * document (`document:<id>`), and the citation a host is shown for it.
 */
export interface MemoryHit {
  doc: { id: string; text: string; source: string };
  /** Higher is better. */
  score: number;
  cite: Source;
}

/** Folder files are split into chunks of about this many characters (at paragraph breaks). */
const CHUNK_CHARS = 1200;
/**
 * The most recent matches ranked by bm25() (FTS5 must otherwise score every match before it
 * can order them): once the rare words are kept, a query rarely matches more.
 */
const RANKED_MATCHES = 1000;

/**
 * What a chat of user `$u` in session `$skip` may recall (docs/agent.md "Memory"), as the one
 * SQL fragment over `memory m` that every recall filters through (FTS here, vectors alike): the
 * user's turns in their other sessions; the user's library documents and this session's
 * attachments, once their document row is committed (a document still being added, or one
 * whose add failed, is never seen); the chunks of this config's folders (`$roots`, a JSON list).
 * Never another session's attachments, never another user's rows. Its values: `scopeParams`.
 */
export const RECALL_SCOPE = `((m.user_id = $u AND m.document_id IS NULL AND m.session_id != $skip)
  OR (m.user_id = $u AND m.document_id IN (SELECT d.document_id FROM documents d
      WHERE d.user_id = $u AND d.session_id IN ('', $skip)))
  OR (m.user_id = '' AND m.root IN (SELECT value FROM json_each($roots))))`;

/** The values `RECALL_SCOPE` names; `sessionId` undefined: no session (every turn, the library only). */
export function scopeParams(
  userId: string,
  sessionId: string | undefined,
  folders: readonly string[],
): { u: string; skip: string; roots: string } {
  return { u: userId, skip: sessionId ?? "", roots: JSON.stringify(folders) };
}

/**
 * The most words (other than an unspaced script's pairs, counted apart) a LIKE recall looks for,
 * each a scan of every row it reads.
 */
const LIKE_WORDS = 16;
/**
 * The passages in scope a LIKE recall reads, the highest ids (about the newest) first: it runs on
 * the main loop in the turn's path, and each word is a scan of each text (16 over 100,000
 * passages held the loop 2.3 s here; the newest 3,000 of 1,200 characters each, 170 ms).
 */
const LIKE_ROWS = 3000;
/**
 * Of those, what a LIKE recall reads: the newest passages until LIKE_BYTES of them, each matched
 * on its head of LIKE_HEAD_CHARS. LIKE_ROWS alone bounds nothing when passages are long (a turn
 * keeps its whole input and answer): 40 pasted turns of 2 Mi characters held the loop over a
 * second for a query of four Chinese pairs, and about four for 16 words. Counted whole, not by
 * the head: SQLite reads a value whole before substr() cuts it (120 turns of 2.1 Mi characters,
 * their heads far under the bound, cost 250-380 ms a recall), and octet_length() is the one
 * measure it gives from the row's header, without reading the text.
 */
const LIKE_HEAD_CHARS = 32 * 1024;
const LIKE_BYTES = 8 * 1024 * 1024;

/**
 * With a query vector, how deep each list (words, meaning) goes into the fusion: deeper than
 * top_k, so a row second in one list and tenth in the other still counts for both.
 */
const FUSION_DEPTH = 50;

interface Row {
  id: number;
  source: string;
  text: string;
  score: number;
  session_id: string;
  seq: number | null;
  root: string;
  document_id: string | null;
  chunk: number | null;
}

const ROW = "m.id, m.source, m.text, m.session_id, m.seq, m.root, m.document_id, m.chunk";

/** A LIKE recall's scan: a row's id, time and the words SQL matched, its text not read out. */
interface Scored {
  id: number;
  at: number;
  score: number;
}

/**
 * Memory (docs/agent.md): a user's past turns in their other sessions, their documents (the
 * library, this session's attachments) and chunks of the files in `memory.folders`, ranked with FTS5's bm25() — the turns are written by the turn's own commit
 * (store/conversations.ts), the folders by `FolderIndex` (store/folder-index.ts) in the
 * background: a search finds what is indexed so far. Without FTS5, a LIKE match ranked by
 * words matched.
 */
export class MemoryStore {
  private readonly stats: TermStats;
  private readonly bytes: string;
  /** The rows' vectors and the in-memory index over them (store/memory-vectors.ts). */
  readonly vectors: MemoryVectors;

  constructor(
    private readonly db: Database,
    private readonly fts: boolean,
    private readonly folders: readonly string[],
  ) {
    this.stats = new TermStats(db, "memory_fts", "memory", Date.now, () => erasureMark(db));
    this.vectors = new MemoryVectors(db);
    this.bytes = textBytes(db);
  }

  /**
   * The word counts recall keeps dropped (store/term-stats.ts): a document's chunks were erased,
   * which records no erase (no turn is refused for it), so the counts would not see it.
   */
  forgetCounts(): void {
    this.stats.forget();
  }

  /**
   * The best `topK` passages among what is indexed now. With the query's vector, the word
   * matches and the nearest vectors of the same model are fused by reciprocal rank
   * (store/rank-fusion.ts; a hit's score is then its fused score); without, the word matches.
   */
  search(
    userId: string,
    query: string,
    topK: number,
    excludeSession?: string,
    vector?: QueryVector,
  ): MemoryHit[] {
    if (topK <= 0) return [];
    const skip = excludeSession ?? "";
    const depth = vector ? Math.max(topK, FUSION_DEPTH) : topK;
    const rows = this.wordRows(userId, query, depth, skip);
    if (!vector) return rows.map((r) => this.hitOf(userId, r));
    const near = this.vectors.nearest(vector, this.scope(userId, skip), depth);
    const fused = fuseRanks([rows.map((r) => r.id), near.map((r) => r.id)]).slice(0, topK);
    const byId = new Map(rows.map((r) => [r.id, r]));
    const missing = fused.filter((f) => !byId.has(f.id)).map((f) => f.id);
    // In scope again: the vector search checked it in its own statement.
    for (const [id, r] of this.rowsInScope(userId, skip, missing)) byId.set(id, r);
    return fused.flatMap((f) => {
      const r = byId.get(f.id);
      return r ? [this.hitOf(userId, { ...r, score: f.score })] : [];
    });
  }

  /**
   * Citations named as they are now (store/source-names.ts): a chat's result is sent after its
   * recall, and a session or document erased in between is shown with `""`, as `sessions.get`
   * shows it, not with the title or name it had.
   */
  named(userId: string, sources: readonly Source[]): Source[] {
    return named(this.db, userId, withoutName(sources), new Map());
  }

  /**
   * `hits` less those no longer stored as they were recalled (their row erased: a document or
   * session deleted, a folder file changed; or the row's id taken by another since).
   */
  stillStored(hits: readonly MemoryHit[]): MemoryHit[] {
    if (hits.length === 0) return [];
    const rows = this.db
      .query("SELECT id, source, text FROM memory WHERE id IN (SELECT value FROM json_each(?))")
      .all(JSON.stringify(hits.map((h) => Number(h.doc.id)))) as {
      id: number;
      source: string;
      text: string;
    }[];
    const stored = new Map(rows.map((r) => [String(r.id), r]));
    return hits.filter((h) => {
      const r = stored.get(h.doc.id);
      return r !== undefined && r.source === h.doc.source && r.text === h.doc.text;
    });
  }

  /** Recall's scope as the vector search filters by it: the same condition as the word search's. */
  private scope(userId: string, skip: string): Scope {
    return {
      sql: RECALL_SCOPE,
      params: scopeParams(userId, skip, this.folders),
      owners: [userId, ""],
      skipOwner: skip ? ownerKey(userId, skip) : undefined,
    };
  }

  private hitOf(userId: string, r: Row): MemoryHit {
    return {
      doc: { id: String(r.id), text: r.text, source: r.source },
      score: r.score,
      cite: this.cite(userId, r),
    };
  }

  /** A hit's citation: the session's title, the document's name or the file's (store/source-names.ts). */
  private cite(userId: string, r: Row): Source {
    const s: Omit<Source, "name"> =
      r.document_id !== null
        ? { kind: "document", id: r.document_id, chunk: r.chunk ?? 0, score: r.score }
        : r.source.startsWith("file:")
          ? {
              kind: "folder",
              id: join(r.root, r.source.slice("file:".length)),
              chunk: r.seq ?? 0,
              score: r.score,
            }
          : { kind: "turn", id: r.session_id, chunk: r.seq ?? 0, score: r.score };
    return { ...s, name: sourceName(this.db, userId, s) };
  }

  /**
   * The word matches. A word of an unspaced script is matched by LIKE, as `sessions.search` does
   * (fts-query.ts UNSPACED); the other words still by the index, the two lists fused by rank: a
   * whole chat message is the query, and one Chinese letter in an English sentence sent all of it
   * to LIKE, which reads the newest LIKE_ROWS passages only and counts `the` as a match as `budget`.
   */
  private wordRows(userId: string, query: string, depth: number, skip: string): Row[] {
    if (!this.fts) return this.likeRows(userId, likeWords(query), depth, skip);
    const unspaced = likeWords(query).filter((w) => UNSPACED.test(w));
    const indexed = this.ftsRows(userId, query, depth, skip);
    if (unspaced.length === 0) return indexed;
    const like = this.likeRows(userId, unspaced, depth, skip);
    if (indexed.length === 0) return like;
    const byId = new Map([...like, ...indexed].map((r) => [r.id, r]));
    return fuseRanks([indexed.map((r) => r.id), like.map((r) => r.id)])
      .slice(0, depth)
      .flatMap((f) => {
        const r = byId.get(f.id);
        return r ? [{ ...r, score: f.score }] : [];
      });
  }

  private ftsRows(userId: string, query: string, topK: number, skip: string): Row[] {
    const match = anyOf(this.stats.informative(words(query)).join(" "));
    if (!match) return [];
    // Ranked by id and score alone: the text of each of up to RANKED_MATCHES passages (a turn is
    // its whole input and answer) was read out on the main loop to keep topK. Only theirs are.
    const ranked = this.db
      .query(
        `SELECT m.id, -bm25(memory_fts) AS score
         FROM memory_fts JOIN memory m ON m.id = memory_fts.rowid
         WHERE memory_fts MATCH $q
           AND ${RECALL_SCOPE}
         ORDER BY memory_fts.rowid DESC LIMIT $cap`,
      )
      .all({ q: match, ...scopeParams(userId, skip, this.folders), cap: RANKED_MATCHES }) as {
      id: number;
      score: number;
    }[];
    return this.withText(
      userId,
      skip,
      ranked.sort((a, b) => b.score - a.score || b.id - a.id).slice(0, topK),
    );
  }

  /**
   * Without FTS5, or for the words of an unspaced script: rows holding any of `terms` (`likeWords`),
   * the most first, then the newest; among the newest LIKE_ROWS in scope. Each word by LIKE, in
   * any of its casings (LIKE folds ASCII only), at most LIKE_WORDS; an unspaced script's pairs,
   * when they would pass that, all counted in one pass over each text (`unspacedCounter`).
   */
  private likeRows(userId: string, terms: readonly string[], topK: number, skip: string): Row[] {
    const spaced = terms.filter((t) => !UNSPACED.test(t)).slice(0, LIKE_WORDS);
    const pairs = terms.filter((t) => UNSPACED.test(t));
    // A few pairs are LIKE's too, cheaper than reading every text out; more are counted apart.
    const unspaced = spaced.length + pairs.length > LIKE_WORDS ? pairs : [];
    const w = unspaced.length > 0 ? spaced : [...spaced, ...pairs];
    if (w.length === 0 && unspaced.length === 0) return [];
    const params: Record<string, string | number> = { ...scopeParams(userId, skip, this.folders) };
    const hits = w.map((t, i) => {
      const any = likeCasings(t).map((c, j) => {
        params[`w${i}_${j}`] = likePattern(c);
        return `m.text LIKE $w${i}_${j} ESCAPE '\\'`;
      });
      return `(${any.join(" OR ")})`;
    });
    // Scored in SQL, its text (a head of a turn's whole input and answer) read out only with pairs
    // to count, dropped once counted: only the best topK are read out whole.
    const scan = this.db.query(
      `SELECT m.id, m.at, ${unspaced.length > 0 ? "m.text" : "NULL AS text"}, (${hits.join(" + ") || "0"}) AS score
       FROM (SELECT m.id, m.at, substr(m.text, 1, $head) AS text
         FROM (SELECT value AS id FROM json_each($ids)) k CROSS JOIN memory m ON m.id = k.id
         WHERE ${RECALL_SCOPE}) m`,
    );
    const count = unspacedCounter(unspaced);
    const scored: Scored[] = [];
    const ids = JSON.stringify(this.newestInScope(userId, skip));
    for (const r of scan.iterate({ ...params, ids, head: LIKE_HEAD_CHARS }) as Iterable<
      Scored & { text: string | null }
    >) {
      const score = r.score + (r.text === null ? 0 : count(r.text));
      if (score > 0) scored.push({ id: r.id, at: r.at, score });
    }
    return this.withText(
      userId,
      skip,
      scored.sort((a, b) => b.score - a.score || b.at - a.at).slice(0, topK),
    );
  }

  /** The rows of the best, scored, their text read out now: theirs only, still in scope. */
  private withText(userId: string, skip: string, best: readonly { id: number; score: number }[]): Row[] {
    const byId = this.rowsInScope(
      userId,
      skip,
      best.map((b) => b.id),
    );
    return best.flatMap((b) => {
      const r = byId.get(b.id);
      return r ? [{ ...r, score: b.score }] : [];
    });
  }

  /**
   * The ids a LIKE recall reads: the newest LIKE_ROWS in scope (by id alone, so no text is read to
   * choose them), until LIKE_BYTES of their text (`textBytes`), the passage that passes it the last.
   */
  private newestInScope(userId: string, skip: string): number[] {
    const rows = this.db
      .query(
        `SELECT m.id, ${this.bytes} AS bytes FROM memory m WHERE ${RECALL_SCOPE} ORDER BY m.id DESC LIMIT $scan`,
      )
      .iterate({ ...scopeParams(userId, skip, this.folders), scan: LIKE_ROWS }) as Iterable<{
      id: number;
      bytes: number;
    }>;
    const ids: number[] = [];
    let bytes = 0;
    for (const r of rows) {
      ids.push(r.id);
      bytes += r.bytes;
      if (bytes >= LIKE_BYTES) break;
    }
    return ids;
  }

  /**
   * The rows of `ids` still in the recall's scope, checked again: another thread's commit (an erase,
   * then a new row) between two statements may have given an id to another user's text.
   */
  private rowsInScope(userId: string, skip: string, ids: readonly number[]): Map<number, Row> {
    if (ids.length === 0) return new Map();
    const rows = this.db
      .query(
        `SELECT ${ROW}, 0 AS score FROM memory m WHERE m.id IN (SELECT value FROM json_each($ids)) AND ${RECALL_SCOPE}`,
      )
      .all({ ...scopeParams(userId, skip, this.folders), ids: JSON.stringify(ids) }) as Row[];
    return new Map(rows.map((r) => [r.id, r]));
  }
}

/** Splits at blank lines into chunks near CHUNK_CHARS, so a hit quotes a passage, not a book. */
export function chunk(text: string): string[] {
  const out: string[] = [];
  let current = "";
  for (const para of text.split(/\n\s*\n/)) {
    const p = para.trim();
    if (!p) continue;
    if (current && current.length + p.length > CHUNK_CHARS) {
      out.push(current);
      current = "";
    }
    current = current ? `${current}\n\n${p}` : p;
    while (current.length > CHUNK_CHARS * 2) {
      // Never between a surrogate pair's halves: each would be stored as U+FFFD.
      const cut = wholeCharCut(current, CHUNK_CHARS);
      out.push(current.slice(0, cut));
      current = current.slice(cut);
    }
  }
  if (current) out.push(current);
  return out;
}
