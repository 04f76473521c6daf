import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE } from "../../src/store/db/open.ts";
import { MemoryStore } from "../../src/store/memory-store.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A store (with FTS5 or without) holding one remembered turn of "u" in session "old". */
function withTurn(text: string, withoutFts: boolean) {
  return withTurns([text], withoutFts);
}

/** A store holding the remembered turns `texts` of "u", the first the oldest, each in a session of its own. */
function withTurns(texts: readonly string[], withoutFts: boolean) {
  const dir = tmpdir("local-ai-memory-words-");
  const store = Store.open(dir.path, { chunkThread: false, withoutFts });
  for (const [i, text] of texts.entries())
    store.conversations.commitTurn({
      userId: "u",
      sessionId: i === 0 ? "old" : `s${i}`,
      agent: "a",
      messages: [{ role: "user", content: text }],
      memoryText: text,
      at: new Date(),
    });
  return {
    recall: (query: string) => store.memory.search("u", query, 5, "now").map((h) => h.doc.text),
    [Symbol.dispose]: () => {
      store.close();
      dir[Symbol.dispose]();
    },
  };
}

for (const withoutFts of [false, true]) {
  describe(`memory recall by words (${withoutFts ? "LIKE" : "FTS5"})`, () => {
    test("a Chinese or Japanese word inside a sentence is recalled by a sentence holding it", () => {
      using zh = withTurn("我喜欢吃寿司", withoutFts);
      expect(zh.recall("寿司好吃吗")).toEqual(["我喜欢吃寿司"]);
      expect(zh.recall("寿司")).toEqual(["我喜欢吃寿司"]);
      using ja = withTurn("猫の名前はミケです", withoutFts);
      expect(ja.recall("ミケ")).toEqual(["猫の名前はミケです"]);
      expect(ja.recall("猫")).toEqual(["猫の名前はミケです"]);
    });

    test("a word late in a long Chinese message is looked for too", () => {
      using zh = withTurn("我喜欢吃寿司", withoutFts);
      // Before the fix only the first 16 pairs were: 寿司 here is the 19th.
      expect(zh.recall("你好！我最近在学做饭，也想问问上次你推荐过的寿司")).toEqual(["我喜欢吃寿司"]);
      expect(zh.recall("今天天气很好我们去公园散步吧然后一起吃晚饭看电影")).toEqual([]);
      using ja = withTurn("カ\u3099ラスの話をした", withoutFts);
      expect(ja.recall("こんにちは、今日はいい天気ですね。昨日話したガラス")).toEqual([
        "カ\u3099ラスの話をした",
      ]);
    });

    test("nothing shared, nothing recalled", () => {
      using zh = withTurn("我喜欢吃寿司", withoutFts);
      expect(zh.recall("今天天气")).toEqual([]);
    });

    test("an accented word is recalled whether either side has it composed or decomposed", () => {
      const composed = "caf\u00e9";
      const decomposed = "cafe\u0301";
      for (const [stored, asked] of [
        [composed, decomposed],
        [decomposed, composed],
      ]) {
        using s = withTurn(`we met at the ${stored} downtown`, withoutFts);
        expect(s.recall(`that ${asked}`)).toEqual([`we met at the ${stored} downtown`]);
      }
    });

    test("a capitalized non-ASCII word is recalled by its lower-case spelling", () => {
      using s = withTurn("Привет from Мария", withoutFts);
      expect(s.recall("привет")).toEqual(["Привет from Мария"]);
    });
  });
}

test("a mixed English and Chinese sentence still finds its English words by the index, in passages older than the newest 3,000", () => {
  using dir = tmpdir("local-ai-memory-words-");
  const store = Store.open(dir.path, { chunkThread: false, withoutFts: false });
  const commit = (sessionId: string, text: string) =>
    store.conversations.commitTurn({
      userId: "u",
      sessionId,
      agent: "a",
      messages: [{ role: "user", content: text }],
      memoryText: text,
      at: new Date(),
    });
  commit("old", "the quarterly budget was approved");
  // Before the fix one Chinese letter sent the whole sentence to LIKE, which reads the newest 3,000.
  for (let i = 0; i < 3001; i++) commit(`s${i % 20}`, `我喜欢吃寿司 ${i}`);
  const recall = (q: string) => store.memory.search("u", q, 5, "now").map((h) => h.doc.text);
  expect(recall("what was the quarterly budget?")).toContain("the quarterly budget was approved");
  expect(recall("what was the quarterly budget, 寿司?")).toContain("the quarterly budget was approved");
  expect(recall("寿司好吃吗")).toHaveLength(5);
  store.close();
});

// Passages can be long (a turn is its whole input and answer; a 0.1 turn was imported whole): a
// LIKE recall handed every passage it matched, text and all, out of SQLite at once to rank them in
// JS, where SQL had ranked them and handed out top_k. Counted here: the passages whose text a
// recall reads out of the database, for a query of 16 words or fewer (scored in SQL).
// The ranked recall alike: it read out the text of each of its up to 1,000 matches, on the main
// loop, to keep top_k (a turn is its whole input and answer, megabytes when pasted).
for (const withoutFts of [true, false])
  test(`a ${withoutFts ? "LIKE" : "FTS5"} recall reads the text of the passages it returns only`, () => {
    using dir = tmpdir("local-ai-memory-words-");
    const store = Store.open(dir.path, { chunkThread: false, withoutFts });
    for (let i = 0; i < 40; i++)
      store.conversations.commitTurn({
        userId: "u",
        sessionId: `s${i}`,
        agent: "a",
        messages: [{ role: "user", content: "x" }],
        memoryText: `我喜欢吃寿司 sushi ${i}`,
        at: new Date(),
      });
    store.close();
    const db = new Database(join(dir.path, DB_FILE));
    let texts = 0;
    const counted = (rows: unknown[]) => {
      for (const r of rows)
        if (typeof (r as { text?: unknown }).text === "string" && (r as { text: string }).text) texts++;
    };
    const watched = new Proxy(db, {
      get(target, key) {
        if (key !== "query") return Reflect.get(target, key, target);
        return (sql: string) => {
          const q = target.query(sql);
          return new Proxy(q, {
            get(s, k) {
              if (k === "all")
                return (...a: unknown[]) => {
                  const rows = (s.all as (...x: unknown[]) => unknown[])(...a);
                  counted(rows);
                  return rows;
                };
              if (k === "iterate")
                return function* (...a: unknown[]) {
                  for (const r of (s.iterate as (...x: unknown[]) => Iterable<unknown>)(...a)) {
                    counted([r]);
                    yield r;
                  }
                };
              const v = Reflect.get(s, k, s);
              return typeof v === "function" ? v.bind(s) : v;
            },
          });
        };
      },
    });
    const memory = new MemoryStore(watched, !withoutFts, []);
    expect(memory.search("u", withoutFts ? "寿司" : "sushi", 3, "now")).toHaveLength(3);
    expect(texts).toBe(3);
    db.close();
  });

describe("memory recall by LIKE: the characters read are bounded, not the passages only", () => {
  const turns = (texts: readonly string[]) => withTurns(texts, true);

  // Each LIKE is a scan of each text read, on the main loop: 40 pasted turns of 2 Mi characters
  // held it over a second for a four-pair Chinese query (16 words: over four), though far under
  // the 3,000 passages LIKE_ROWS allows.
  test("a long passage is read for its first 32 Ki characters only", () => {
    const long = `${"filler ".repeat(40_000)}我喜欢吃寿司`;
    using s = turns([long, "寿司在这里"]);
    expect(s.recall("寿司")).toEqual(["寿司在这里"]);
  });

  test("passages are read newest first until 8 Mi characters, however few they are", () => {
    const old = "我喜欢吃寿司";
    const huge = `${"filler ".repeat(5_000)}。`;
    using s = turns([old, ...Array.from({ length: 300 }, () => huge), "寿司在这里"]);
    expect(s.recall("寿司")).toEqual(["寿司在这里"]);
  });

  // SQLite hands substr() a value it has read whole: the head of a 2.1 Mi character turn cost its
  // 2.1 Mi, and 120 such turns (heads far under 8 Mi) were each read in full, 250 ms a recall. A
  // turn read costs its whole size: here the passage past 8 MiB of them is never reached, though
  // the word is in its head.
  test("passages are read newest first until 8 MiB of them is read whole, not of their heads", () => {
    const old = `我喜欢吃寿司${"filler ".repeat(40_000)}`;
    const long = "filler ".repeat(45_000);
    using s = turns([old, ...Array.from({ length: 30 }, () => long), "寿司在这里"]);
    expect(s.recall("寿司")).toEqual(["寿司在这里"]);
  });
});

// octet_length() came with SQLite 3.43; on macOS Bun uses the system's library (docs/agent.md
// "SQLite per OS"), 3.39 on macOS 13: every recall of a Chinese or Japanese word failed there with
// "no such function". Such a library is stood in for by refusing the statements that name it.
test("a LIKE recall works on a SQLite without octet_length(), as an older macOS's", () => {
  using dir = tmpdir("local-ai-memory-words-");
  const store = Store.open(dir.path, { chunkThread: false });
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "old",
    agent: "a",
    messages: [{ role: "user", content: "我喜欢吃寿司" }],
    memoryText: "我喜欢吃寿司",
    at: new Date(),
  });
  store.close();
  const db = new Database(join(dir.path, DB_FILE));
  const older = new Proxy(db, {
    get(target, key) {
      if (key !== "query") return Reflect.get(target, key, target);
      return (sql: string) => {
        if (/octet_length/i.test(sql)) throw new Error("no such function: octet_length");
        return target.query(sql);
      };
    },
  });
  try {
    const memory = new MemoryStore(older, true, []);
    expect(memory.search("u", "寿司", 3, "now").map((h) => h.doc.text)).toEqual(["我喜欢吃寿司"]);
  } finally {
    db.close();
  }
});
