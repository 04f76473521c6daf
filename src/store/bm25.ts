/**
 * A small Okapi BM25 ranking (k1 = 1.2, b = 0.75) over short documents. Pure: tokenize,
 * build, search. Sized for one user's past turns and a folder of notes, not for the web.
 */
export interface Doc {
  id: string;
  text: string;
  source: string;
}

export interface Hit {
  doc: Doc;
  score: number;
}

const K1 = 1.2;
const B = 0.75;

/** Lower-cased runs of letters/digits (any script); very short tokens carry no signal. */
export function tokenize(text: string): string[] {
  return (text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? []).filter((t) => t.length > 1);
}

export class Bm25 {
  private readonly docs: { doc: Doc; tf: Map<string, number>; len: number }[] = [];
  private readonly df = new Map<string, number>();
  private totalLen = 0;

  add(doc: Doc): void {
    const tokens = tokenize(doc.text);
    const tf = new Map<string, number>();
    for (const t of tokens) tf.set(t, (tf.get(t) ?? 0) + 1);
    for (const t of tf.keys()) this.df.set(t, (this.df.get(t) ?? 0) + 1);
    this.docs.push({ doc, tf, len: tokens.length });
    this.totalLen += tokens.length;
  }

  get size(): number {
    return this.docs.length;
  }

  search(query: string, topK: number): Hit[] {
    if (topK <= 0 || this.docs.length === 0) return [];
    const terms = [...new Set(tokenize(query))];
    const n = this.docs.length;
    const avgLen = this.totalLen / n || 1;
    const hits: Hit[] = [];
    for (const d of this.docs) {
      let score = 0;
      for (const t of terms) {
        const f = d.tf.get(t);
        if (!f) continue;
        const df = this.df.get(t) ?? 0;
        const idf = Math.log(1 + (n - df + 0.5) / (df + 0.5));
        score += idf * ((f * (K1 + 1)) / (f + K1 * (1 - B + (B * d.len) / avgLen)));
      }
      if (score > 0) hits.push({ doc: d.doc, score });
    }
    hits.sort((a, b) => b.score - a.score || a.doc.id.localeCompare(b.doc.id));
    return hits.slice(0, topK);
  }
}
