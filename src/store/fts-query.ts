/**
 * User text as an FTS5 query, built from words only so that no character of the user's can
 * be taken for query syntax (quotes, `NEAR`, `-`, column filters): each word is quoted.
 * Words are lower-cased runs of letters, digits and combining marks in any script, at least two
 * long. Marks stay inside a word (Devanagari's vowel signs, a decomposed accent, the dot `İ`
 * lower-cases to): split at each, `हिन्दी` left only single letters, dropped, and nothing was
 * found. The quoted word is split by the index's own tokenizer, as the text was (unicode61 takes
 * a diacritic away and splits at the other marks), so it matches where the text says it.
 */
const MAX_TERMS = 32;
const WORD = /[\p{L}\p{N}\p{M}]+/gu;

/**
 * The first MAX_TERMS words, read one at a time: a chat's input may be megabytes, and lower-casing
 * all of it and listing every word before keeping 32 held the loop for a quarter of a second.
 * Each run is lower-cased and split again, as lower-casing the whole text first did: lower-casing
 * may make a character of none of the three kinds.
 */
export function words(text: string): string[] {
  const seen = new Set<string>();
  const runs = new RegExp(WORD);
  for (let run = runs.exec(text); run !== null && seen.size < MAX_TERMS; run = runs.exec(text)) {
    for (const t of run[0].toLowerCase().match(WORD) ?? []) {
      if (t.length > 1) seen.add(t);
      if (seen.size >= MAX_TERMS) break;
    }
  }
  return [...seen];
}

/** Any of the words, ranked by bm25: memory recall ("what was said about any of this"). */
export function anyOf(text: string): string | undefined {
  const w = words(text);
  return w.length > 0 ? w.map((t) => `"${t}"`).join(" OR ") : undefined;
}

/** All of the words, the last as a prefix (the user may still be typing it): search. */
export function allOf(text: string): string | undefined {
  const w = words(text);
  if (w.length === 0) return undefined;
  return w.map((t, i) => (i === w.length - 1 ? `"${t}"*` : `"${t}"`)).join(" ");
}

/** A LIKE pattern matching `word` anywhere, for SQLite builds without FTS5 (`ESCAPE '\'`). */
export function likePattern(word: string): string {
  return `%${word.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}
