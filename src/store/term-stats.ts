import type { Database } from "bun:sqlite";

/**
 * How many documents of an FTS5 index hold a word, cached: bm25() gives a word found in most
 * documents almost no weight, yet an OR query with one ("what", "is") must still rank every
 * document that has it — a hundred milliseconds over 100,000 turns. Such words are dropped
 * from memory queries. Counts move slowly, so a cached one is kept for a while.
 */
const TTL_MS = 10 * 60_000;
const MAX_CACHED = 4096;
/** Below this many documents every match is ranked: it costs less than asking for counts. */
const SMALL_INDEX = 2000;

export class TermStats {
  private readonly cache = new Map<string, { doc: number; at: number }>();
  private docs: { n: number; at: number } | undefined;
  /** The newest erase when the counts were kept (`erasures`). */
  private erasedAt = 0;

  constructor(
    private readonly db: Database,
    private readonly table: "memory_fts" | "messages_fts",
    private readonly content: "memory" | "messages",
    private readonly now: () => number = Date.now,
    /** The newest erase's number (store/erasures.ts `erasureMark`), this core's or another's. */
    private readonly erasures: () => number = () => 0,
  ) {}

  /**
   * Every count dropped once an erase came after them (users.delete, sessions.delete…): its
   * user's query words were kept as keys for ten minutes past it, and its rows' counts went on
   * leaving words out of other users' recalls. Read before any count, so none predates it unseen.
   */
  private forgetIfErased(): void {
    const mark = this.erasures();
    if (mark === this.erasedAt) return;
    this.forget();
    this.erasedAt = mark;
  }

  /** Every count dropped: rows were erased that no erase's number tells of (`documents.delete`). */
  forget(): void {
    this.cache.clear();
    this.docs = undefined;
  }

  /**
   * Documents holding `term`, cached. Counted by a match of the quoted word, not looked up in
   * fts5vocab: its terms are the tokenizer's (`café` is `cafe`, `हिन्दी` three letters), the
   * query's word as typed is none of them, and a word counted in no document was dropped.
   * A count of none is not kept: a turn recalls its input before committing it, so a word it is
   * the first to say was counted 0 and dropped from every recall for the next ten minutes, and
   * the one turn that held it was never found (asking FTS5 for an absent word costs little).
   */
  docsWith(term: string): number {
    const hit = this.cache.get(term);
    const now = this.now();
    if (hit && now - hit.at < TTL_MS) return hit.doc;
    const row = this.db
      .query(`SELECT count(*) AS doc FROM ${this.table} WHERE ${this.table} MATCH ?`)
      .get(`"${term.replaceAll('"', '""')}"`) as { doc: number };
    if (row.doc === 0) return 0;
    if (this.cache.size >= MAX_CACHED) this.cache.clear();
    this.cache.set(term, { doc: row.doc, at: now });
    return row.doc;
  }

  /** About how many documents the index holds (the content table's highest id). */
  docCount(): number {
    const now = this.now();
    if (this.docs && now - this.docs.at < TTL_MS) return this.docs.n;
    const row = this.db.query(`SELECT COALESCE(MAX(id), 0) AS n FROM ${this.content}`).get() as { n: number };
    this.docs = { n: row.n, at: now };
    return row.n;
  }

  /**
   * The words worth asking for: those in at most `share` of the documents; when every word is
   * that common, the `keep` rarest. A small index is ranked whole: all words kept.
   */
  informative(terms: readonly string[], share = 0.1, keep = 2): string[] {
    this.forgetIfErased();
    const n = this.docCount();
    if (n < SMALL_INDEX) return [...terms];
    const scored = terms.map((t) => ({ t, doc: this.docsWith(t) })).filter((s) => s.doc > 0);
    const rare = scored.filter((s) => s.doc <= share * n).map((s) => s.t);
    if (rare.length > 0) return rare;
    return scored
      .sort((a, b) => a.doc - b.doc)
      .slice(0, keep)
      .map((s) => s.t);
  }
}
