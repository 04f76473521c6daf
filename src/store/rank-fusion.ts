/**
 * Reciprocal rank fusion (docs/agent.md, "Memory"): each list gives an item 1 / (K + rank),
 * rank counted from 1, and an item's score is the sum over the lists that hold it. Ranks, not
 * scores, are fused because bm25() and cosine similarity are on scales that cannot be compared;
 * K = 60 is the constant of the method's paper (Cormack, Clarke and Büttcher, 2009), which keeps
 * one list's first place from outweighing agreement between both lists. Pure.
 */
export const RRF_K = 60;

export interface Fused {
  id: number;
  score: number;
}

/** The ids of `lists` (each best first) by fused score, best first; ties go to the higher id (the newer row). */
export function fuseRanks(lists: readonly (readonly number[])[], k = RRF_K): Fused[] {
  const scores = new Map<number, number>();
  for (const list of lists) {
    list.forEach((id, i) => {
      scores.set(id, (scores.get(id) ?? 0) + 1 / (k + i + 1));
    });
  }
  return [...scores].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || b.id - a.id);
}
