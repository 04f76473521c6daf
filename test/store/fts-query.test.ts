import { Database } from "bun:sqlite";
import { afterEach, describe, expect, test } from "bun:test";
import { allOf, anyOf, words } from "../../src/store/fts-query.ts";
import { TermStats } from "../../src/store/term-stats.ts";

/** The split as docs/agent.md states it, on the whole text at once: the oracle. */
function wholeText(text: string): string[] {
  const seen = new Set<string>();
  for (const t of text.toLowerCase().match(/[\p{L}\p{N}\p{M}]+/gu) ?? []) {
    if (t.length > 1) seen.add(t);
    if (seen.size >= 32) break;
  }
  return [...seen];
}

const realLower = String.prototype.toLowerCase;
afterEach(() => {
  String.prototype.toLowerCase = realLower;
});

describe("words", () => {
  test("the same words as the whole text lower-cased and split, in any script", () => {
    const texts = [
      "Hello, World! hello again",
      "İstanbul'da ÇAY içtik; ΣΟΦΙΑ σοφός",
      "a b c dd ee 12 3 x9 — 東京 の 天気 は？",
      'NEAR(x y) "quoted" -minus col:filter *',
      Array.from({ length: 100 }, (_, i) => `w${i}`).join(" "),
      "",
      "!!! ... ???",
    ];
    for (const t of texts) expect(words(t)).toEqual(wholeText(t));
    expect(anyOf("Hello world")).toBe('"hello" OR "world"');
    expect(allOf("Hello wor")).toBe('"hello" "wor"*');
  });

  test("megabytes of input: only what the 32 words need is lower-cased", () => {
    let lowered = 0;
    String.prototype.toLowerCase = function (this: string) {
      lowered += this.length;
      return realLower.call(this);
    };
    const text = Array.from({ length: 40 }, (_, i) => `Word${i}`).join(" ") + " tail".repeat(1_000_000);
    const got = words(text);
    String.prototype.toLowerCase = realLower;
    expect(got).toHaveLength(32);
    expect(got[0]).toBe("word0");
    expect(lowered).toBeLessThan(1000);
  });

  test("megabytes of input with few words: only its head is read", () => {
    let lowered = 0;
    String.prototype.toLowerCase = function (this: string) {
      lowered += this.length;
      return realLower.call(this);
    };
    // One word again and again never makes 32: the whole text was lower-cased a word at a time
    // (an 8 MiB chat input of `İ ` held the loop 1.8 s in its recall).
    const got = words(`${"ab ".repeat(1_000_000)}tail`);
    String.prototype.toLowerCase = realLower;
    expect(got).toEqual(["ab"]);
    expect(lowered).toBeLessThan(64 * 1024);
  });

  test("a word the index splits into thousands of pieces is no phrase of thousands of tokens", () => {
    // unicode61 splits at a spacing mark (visarga), so this one word is a phrase of 10,000 `a`s
    // (50,000 took FTS5 a minute over 3,000 rows, on the main loop: a chat's recall). Within the
    // head of the text the words are read from.
    const long = "a\u0903".repeat(10_000);
    const terms = (text: string) => words(text).join("").length;
    expect(terms(long)).toBeLessThanOrEqual(1000);
    // Left out, not cut (a cut word matches nothing); the shorter words after it are kept.
    expect(words(`${long} hello world`)).toEqual(["hello", "world"]);
    // Many long words: together within the bound.
    const many = Array.from({ length: 40 }, (_, i) => `${"x".repeat(300)}${i}`).join(" ");
    expect(terms(many)).toBeLessThanOrEqual(1000);
    expect(words(many).length).toBeGreaterThan(0);
  });
});

/** A memory table and its index as store/db/migrations.ts makes them, and a function storing a text. */
function memoryIndex(): { db: Database; store: (text: string) => void } {
  const db = new Database(":memory:");
  db.run("CREATE TABLE memory (id INTEGER PRIMARY KEY, text TEXT NOT NULL)");
  // The index holds `cafe`, `naive`, single Devanagari letters.
  db.run(`CREATE VIRTUAL TABLE memory_fts USING fts5(text, content='memory', content_rowid='id',
    tokenize='unicode61 remove_diacritics 2')`);
  const add = db.query("INSERT INTO memory (text) VALUES (?)");
  const index = db.query("INSERT INTO memory_fts (rowid, text) VALUES (?, ?)");
  return { db, store: (text) => void index.run(add.run(text).lastInsertRowid, text) };
}

describe("TermStats.informative", () => {
  test("a big index keeps an accented or marked word: counted as the index's tokenizer splits it", () => {
    const { db, store } = memoryIndex();
    const texts = ["café au lait", "a naïve plan", "हिन्दी भाषा", "İstanbul trip"];
    for (let i = 0; i < 2100; i++) store(`${texts[i % 50] ?? "filler"} row${i}`);
    const stats = new TermStats(db, "memory_fts", "memory");
    // Each in a few of 2100 rows: rare, worth asking for; "row0" once too.
    expect(stats.informative(words("café naïve हिन्दी İstanbul row0"))).toEqual(
      words("café naïve हिन्दी İstanbul row0"),
    );
    // One in every row: dropped while a rarer word is asked for.
    expect(stats.informative(words("filler café"))).toEqual(["café"]);
  });
});

describe("TermStats: a word in no document yet", () => {
  test("is counted again once stored: a turn's own new word, asked before its commit, is found next", () => {
    const { db, store } = memoryIndex();
    for (let i = 0; i < 2100; i++) store(`filler row${i}`);
    const stats = new TermStats(db, "memory_fts", "memory");
    // The turn that first names it recalls before it is committed: in no document then.
    expect(stats.informative(words("filler zorbax"))).toEqual(["filler"]);
    store("my dog is called zorbax");
    // Another chat a minute later asks for it: the one turn that holds it must be asked for.
    expect(stats.informative(words("filler zorbax"))).toEqual(["zorbax"]);
  });
});
