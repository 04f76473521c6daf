import type { Database } from "bun:sqlite";
import { wholeCharCut } from "../util/text-cut.ts";

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
/**
 * The characters the words may come to together, as a `sessions.search` query may: the index
 * splits a quoted word at its marks, each piece a token of the word's phrase, and FTS5's work
 * grows with them (one 100 KB word of a letter and a spacing mark each, a phrase of 50,000
 * tokens, held a chat's recall on the main loop for a minute; a hostile review). A word that
 * would pass it is left out (cut, it would match nothing); shorter ones after it are kept.
 */
const MAX_TERM_CHARS = 1000;
/**
 * The head of the text the words are read from: a text of few words never makes 32, and was read
 * to its end a word at a time (an 8 MiB chat input of `İ ` held the loop 1.8 s in its recall).
 * Text has its 32 words long before this.
 */
const MAX_SCAN_CHARS = 32 * 1024;
const WORD = /[\p{L}\p{N}\p{M}]+/gu;

/**
 * The first MAX_TERMS words, read one at a time: a chat's input may be megabytes, and lower-casing
 * all of it and listing every word before keeping 32 held the loop for a quarter of a second.
 * Each run is lower-cased and split again, as lower-casing the whole text first did: lower-casing
 * may make a character of none of the three kinds. `oneLetter`: a word of one character it matches
 * is kept too (`sessions.search`: one Han character is a word, `猫`).
 */
export function words(text: string, oneLetter?: RegExp): string[] {
  const seen = new Set<string>();
  let chars = 0;
  const runs = new RegExp(WORD);
  const cut = text.length > MAX_SCAN_CHARS;
  const head = cut ? text.slice(0, wholeCharCut(text, MAX_SCAN_CHARS)) : text;
  for (let run = runs.exec(head); run !== null && seen.size < MAX_TERMS; run = runs.exec(head)) {
    // A word the head's end goes through is not the word the text holds.
    if (cut && runs.lastIndex === head.length) break;
    for (const t of run[0].toLowerCase().match(WORD) ?? []) {
      if ((t.length > 1 || oneLetter?.test(t)) && !seen.has(t) && chars + t.length <= MAX_TERM_CHARS) {
        seen.add(t);
        chars += t.length;
      }
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

/**
 * `word` (lower-cased, as `words` gives it) as the text may spell it, for LIKE, which folds ASCII
 * only: also capitalized and in capitals, so `привет` finds `Привет` and `École` (a query is lower-cased) finds it too.
 * Each composed again: `İ` lower-cases to i and a combining dot, which upper-case to I and the dot, not the `İ` of the text.
 * And each decomposed: LIKE compares code points, and a text written decomposed (`cafe` and U+0301, as macOS
 * names files) was never found by the composed word, nor a composed text by a word typed decomposed.
 */
export function likeCasings(word: string): string[] {
  if (/^[\x00-\x7f]*$/.test(word)) return [word];
  const [first = "", ...rest] = word;
  return [
    ...new Set(
      [word, first.toUpperCase() + rest.join(""), word.toUpperCase()].flatMap((c) => [
        c.normalize("NFC"),
        c.normalize("NFD"),
      ]),
    ),
  ];
}

/**
 * A letter of a script written without spaces between its words (Chinese, Japanese, Thai…):
 * unicode61 makes each run of them between punctuation one token, so the index never matches a
 * word inside a sentence (`寿司` in `我喜欢吃寿司`). A query with one is matched by LIKE.
 */
export const UNSPACED =
  /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]/u;
const UNSPACED_RUNS = new RegExp(`${UNSPACED.source}+|(?:(?!${UNSPACED.source})[^])+`, "gu");

/**
 * A sentence's words for a LIKE match of any of them (memory recall): its runs of an unspaced
 * script cut into overlapping pairs of characters, as where its words begin and end is not
 * written (`寿司好吃吗` holds `寿司`, and so does a turn that mentioned it); a run of one kept whole
 * (`猫`). The other words as `words` gives them. Composed first: a pair is never half a letter.
 */
export function likeWords(text: string): string[] {
  const out = new Set<string>();
  for (const w of words(text, UNSPACED)) {
    for (const run of w.normalize("NFC").match(UNSPACED_RUNS) ?? []) {
      const chars = [...run];
      if (!UNSPACED.test(run) || chars.length === 1) {
        if (chars.length > 1 || UNSPACED.test(run)) out.add(run);
        continue;
      }
      for (let i = 0; i + 1 < chars.length; i++) out.add(chars[i] + (chars[i + 1] ?? ""));
    }
  }
  return [...out];
}

/**
 * How many of `terms` (`likeWords`' pairs and single letters of an unspaced script) a text holds,
 * counted in one pass over it whatever their number: as a LIKE each was a scan of every text, so
 * recall looked for a message's first 16 pairs only, and a question's words later in a long
 * message were never looked for. The text is composed first, as the terms are (a kana's
 * voiced mark may be stored apart).
 */
export function unspacedCounter(terms: readonly string[]): (text: string) => number {
  // A pair's key is its two code points in one number, a single letter's its code point: no clash.
  const key = (prev: number, c: number) => prev * 0x110000 + c;
  const seen = new Map<number, number>();
  for (const t of terms) {
    const [a = 0, b] = [...t].map((ch) => ch.codePointAt(0) ?? 0);
    seen.set(b === undefined ? a : key(a, b), 0);
  }
  let pass = 0;
  let n = 0;
  const found = (k: number) => {
    const last = seen.get(k);
    if (last !== undefined && last !== pass) {
      seen.set(k, pass);
      n++;
    }
  };
  return (raw) => {
    const text = raw.normalize("NFC");
    pass++;
    n = 0;
    let prev = 0;
    for (let i = 0; i < text.length; ) {
      const c = text.codePointAt(i) ?? 0;
      i += c > 0xffff ? 2 : 1;
      found(c);
      if (prev !== 0) found(key(prev, c));
      prev = c;
    }
    return n;
  };
}

/**
 * A passage's size in SQL, as a LIKE recall counts what it reads (store/memory-store.ts): its UTF-8
 * bytes by octet_length(), told from the row's header without reading the text. That came with
 * SQLite 3.43, and on macOS Bun uses the system's library (3.39 on macOS 13; docs/agent.md "SQLite
 * per OS"): there the bytes of the text read whole, as before, or every such recall failed.
 */
export function textBytes(db: Database): string {
  try {
    db.query("SELECT octet_length('')").get();
    return "octet_length(m.text)";
  } catch {
    return "length(CAST(m.text AS BLOB))";
  }
}
