import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ChunkThread } from "../../src/store/chunk-thread.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { markedSnippet, searchSessions } from "../../src/store/session-search.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

test("a snippet is looked for in the first 32K characters of a hit's message only, never the whole of it", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  const MiB = 1024 * 1024;
  const far = `start ${"lorem ".repeat(MiB / 6)} needle ${"ipsum ".repeat(MiB / 6)}`;
  const near = `a needle early on\n\tand ${"x ".repeat(MiB)}`;
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "s",
    agent: "plain",
    messages: [
      { role: "user", content: far },
      { role: "assistant", content: near },
    ],
    at: new Date(),
  });
  const hits = await store.search("u", "needle", 10);
  const bySeq = new Map(hits.map((h) => [h.seq, h.snippet]));
  expect(bySeq.get(1)).toStartWith("a **needle** early on and x x");
  // The match 1 MB in is found by the index but not looked for: the message's start, unmarked.
  expect(bySeq.get(0)).toStartWith("start lorem lorem");
  expect(bySeq.get(0)).not.toContain("**");
  for (const s of bySeq.values()) expect(s.length).toBeLessThanOrEqual(110);
  store.close();
});

function said(store: Store, text: string): void {
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "s",
    agent: "plain",
    messages: [{ role: "user", content: text }],
    at: new Date(),
  });
}

test("a search runs on the store's thread: the main loop turns before it answers", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  said(store, "where is the lighthouse");
  let turned = false;
  setImmediate(() => {
    turned = true;
  });
  // On this thread the search would answer in a microtask, before any turn of the loop.
  expect((await store.search("u", "lighthouse", 5)).map((h) => h.seq)).toEqual([0]);
  expect(turned).toBe(true);
  store.close();
  await expect(store.search("u", "lighthouse", 5)).rejects.toThrow();
});

test("the search thread stops when idle and the next search starts another", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  said(store, "a quiet harbour");
  store.close();
  const thread = new ChunkThread(join(dir.path, DB_FILE), 100, 20);
  expect((await thread.search(true, "u", "harbour", 5)).map((h) => h.session_id)).toEqual(["s"]);
  expect(thread.running).toBe(true);
  await Bun.sleep(80);
  expect(thread.running).toBe(false);
  expect((await thread.search(true, "u", "quiet", 5)).map((h) => h.session_id)).toEqual(["s"]);
  expect(await thread.search(true, "someone else", "quiet", 5)).toEqual([]);
  thread.stop();
});

/** A database holding user u's one message "the lighthouse keeper", opened outside the store. */
function lighthouse(folder: string): Database {
  const store = Store.open(folder, { chunkThread: false });
  said(store, "the lighthouse keeper");
  store.close();
  return new Database(join(folder, DB_FILE));
}

test("a hit erased between the ranking and its row's read (an erase on the store's other thread) is left out", async () => {
  using dir = tmpdir();
  const db = lighthouse(dir.path);
  // The row's read finds nothing, as after an erase committed in between.
  const erasedMeanwhile = {
    query: (sql: string) => (sql.includes("WHERE m.id = ?") ? { get: () => null } : db.query(sql)),
  } as unknown as Database;
  expect(searchSessions(db, true, "u", "lighthouse", 5)).toHaveLength(1);
  expect(searchSessions(erasedMeanwhile, true, "u", "lighthouse", 5)).toEqual([]);
  db.close();
});

test("a search answered from the thread's snapshot after a delete has answered holds nothing of the deleted", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  const held = heldSearch(store, "the lighthouse keeper");
  await held.read;
  expect((await store.deleteSession("u", "s")).deleted).toBe(true);
  expect((await held.answer()).map((h) => h.session_id)).toEqual(["kept"]);
  store.close();
});

test("a snippet is cut between characters: no half of an emoji at either end", () => {
  const emoji = "😀".repeat(60);
  const snippet = markedSnippet(`${emoji} needle ${emoji}`, ["needle"]);
  expect(snippet).toContain("**needle**");
  // A lone surrogate is no text: a host's strict JSON parser refuses the whole result line.
  expect(snippet.isWellFormed()).toBe(true);
  // The scan's own bound (32K characters) falling inside a pair, the word near it.
  for (const pad of [40, 41]) {
    const text = `${"x".repeat(32 * 1024 - pad)} needle ${"😀".repeat(100)}`;
    expect(markedSnippet(text, ["needle"]).isWellFormed()).toBe(true);
  }
});

test("a hit whose id another user's message took between the ranking and its row's read is left out", async () => {
  using dir = tmpdir();
  const db = lighthouse(dir.path);
  const { id } = db.query("SELECT id FROM messages").get() as { id: number };
  // Erased, and its id (the newest, so SQLite gives it again) taken by another user's message.
  const reusedMeanwhile = {
    query: (sql: string) => {
      if (sql.includes("WHERE m.id = ?")) {
        db.run("DELETE FROM messages WHERE id = ?", [id]);
        db.run(
          `INSERT INTO sessions (user_id, session_id, title, agent, created_at, updated_at, message_count, preview)
           VALUES ('other', 'theirs', 'their title', 'plain', 1, 1, 1, '')`,
        );
        db.run(
          `INSERT INTO messages (user_id, session_id, seq, role, content, created_at)
           VALUES ('other', 'theirs', 0, 'user', 'their lighthouse secret', 1)`,
        );
        expect((db.query("SELECT max(id) AS id FROM messages").get() as { id: number }).id).toBe(id);
      }
      return db.query(sql);
    },
  } as unknown as Database;
  expect(searchSessions(reusedMeanwhile, true, "u", "lighthouse", 5)).toEqual([]);
  db.close();
});

test("a hit whose id the same user's tool message took meanwhile is left out: tool traffic is not searched", async () => {
  using dir = tmpdir();
  const db = lighthouse(dir.path);
  const { id, session_id } = db.query("SELECT id, session_id FROM messages").get() as {
    id: number;
    session_id: string;
  };
  const reusedMeanwhile = {
    query: (sql: string) => {
      if (sql.includes("WHERE m.id = ?")) {
        db.run("DELETE FROM messages WHERE id = ?", [id]);
        db.run(
          `INSERT INTO messages (user_id, session_id, seq, role, content, created_at)
           VALUES ('u', ?, 5, 'tool', 'lighthouse tool output', 1)`,
          [session_id],
        );
        expect((db.query("SELECT max(id) AS id FROM messages").get() as { id: number }).id).toBe(id);
      }
      return db.query(sql);
    },
  } as unknown as Database;
  expect(searchSessions(reusedMeanwhile, true, "u", "lighthouse", 5)).toEqual([]);
  db.close();
});

/** Each text said in a session of its own, `s0`, `s1`… */
function eachInASession(store: Store, texts: string[]): void {
  for (const [i, content] of texts.entries())
    store.conversations.commitTurn({
      userId: "u",
      sessionId: `s${i}`,
      agent: "plain",
      messages: [{ role: "user", content }],
      at: new Date(),
    });
}

test("words with combining marks are found: Devanagari's vowel signs, a decomposed accent, İ lower-cased", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false });
  const texts = ["हिन्दी भाषा सीखना", "a naïve plan", "İstanbul trip"];
  eachInASession(store, texts);
  const found = async (q: string) => (await store.search("u", q, 10)).map((h) => h.session_id);
  expect(await found("हिन्दी")).toEqual(["s0"]);
  expect(await found("सीखना")).toEqual(["s0"]);
  expect(await found("nai\u0308ve")).toEqual(["s1"]);
  expect(await found("İSTANBUL")).toEqual(["s2"]);
  expect(await found("istanbul")).toEqual(["s2"]);
  store.close();
});

test("a snippet is one line as a session's preview is: no control character, NEL or bidi override", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  // A pasted file name that an override shows reversed, a NEL a host may break the line at, an ESC.
  const text = "see the \u202Egnp.exe\u202C needle\u0085next line \u001b[31mred\u2066x\u2069";
  said(store, text);
  const [hit] = await store.search("u", "needle", 10);
  expect(hit?.snippet).toBe("see the gnp.exe **needle** next line [31mred x ");
  expect(markedSnippet(text, ["needle"])).toBe(hit?.snippet as string);
  // The preview folds the same characters (store/title.ts).
  expect(store.list("u", 1).sessions[0]?.preview).toBe("see the gnp.exe needle next line [31mred x");
  store.close();
});

// An edit (`replace_from`, `regenerate`) erases the turns it replaces as a delete erases a session:
// a search read from the snapshot before it, answered after the edit's result, handed the host
// a snippet of the text the user had just edited away (and the title it had before).
test("a search answered from the thread's snapshot after an edit has committed holds nothing it replaced", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  const held = heldSearch(store, "my lighthouse secret");
  await held.read;
  await store.writeOffLoop({
    kind: "commit",
    turn: {
      userId: "u",
      sessionId: "s",
      agent: "plain",
      messages: [{ role: "user", content: "the harbour" }],
      replaceFromSeq: 0,
      at: new Date(),
    },
  });
  const hits = await held.answer();
  expect(hits.map((h) => h.snippet).join(" ")).not.toContain("secret");
  expect(hits.map((h) => h.session_id)).toEqual(["kept"]);
  store.close();
});

// A turn setting aside an interrupted one (stop, then ask again) records an erasure for other
// cores' KV slots, but erases no message: a search read before its commit still holds the
// session's hits, which are all still there (it left the session out, as after an edit).
test("a search answered after a turn of a hit's session set aside an interrupted one keeps its hits", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  const held = heldSearch(store, "my lighthouse notes");
  await held.read;
  const turn = { userId: "u", sessionId: "s", agent: "plain", at: new Date() };
  store.conversations.commitTurn({ ...turn, setAside: true, messages: [{ role: "user", content: "new" }] });
  const hits = await held.answer();
  expect(hits.map((h) => h.session_id).sort()).toEqual(["kept", "s"]);
  store.close();
});

/**
 * Session `s` saying `text` and `kept` saying "another lighthouse"; a search for "lighthouse"
 * whose thread's answer is held back, as under load: `read` once the thread has read, `answer`
 * lets it go and gives the search's hits.
 */
function heldSearch(store: Store, text: string) {
  said(store, text);
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "kept",
    agent: "plain",
    messages: [{ role: "user", content: "another lighthouse" }],
    at: new Date(),
  });
  const thread = (store as unknown as { searchThread: ChunkThread }).searchThread;
  const search = thread.search.bind(thread);
  const [read, held] = [Promise.withResolvers<void>(), Promise.withResolvers<void>()];
  thread.search = async (...args) => {
    const hits = await search(...args);
    read.resolve();
    await held.promise;
    return hits;
  };
  const searching = store.search("u", "lighthouse", 5);
  return {
    read: read.promise,
    answer: () => {
      held.resolve();
      return searching;
    },
  };
}

test("a word of a script written without spaces (Chinese, Japanese, Thai) is found inside its sentence", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false });
  // unicode61 breaks words at spaces and punctuation only: each of these is one token whole.
  const texts = ["我喜欢吃寿司", "東京の天気は晴れです", "ฉันชอบกินข้าวผัด", "sushi for lunch"];
  eachInASession(store, texts);
  const found = async (q: string) => (await store.search("u", q, 10)).map((h) => [h.session_id, h.snippet]);
  expect(await found("寿司")).toEqual([["s0", "我喜欢吃**寿司**"]]);
  expect(await found("天気 晴れ")).toEqual([["s1", "東京の**天気**は**晴れ**です"]]);
  expect(await found("ข้าวผัด")).toEqual([["s2", "ฉันชอบกิน**ข้าวผัด**"]]);
  // Words of other scripts are still matched as words.
  expect(await found("sushi")).toEqual([["s3", "**sushi** for lunch"]]);
  store.close();
});

test("a word of one Chinese or Japanese character is searched for; one Latin letter still is not", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false });
  eachInASession(store, ["我的猫很可爱", "お茶を飲む", "a cat"]);
  const found = async (q: string) => (await store.search("u", q, 10)).map((h) => [h.session_id, h.snippet]);
  expect(await found("猫")).toEqual([["s0", "我的**猫**很可爱"]]);
  expect(await found("茶")).toEqual([["s1", "お**茶**を飲む"]]);
  // One letter of a spaced script would match almost every message.
  expect(await found("a")).toEqual([]);
  store.close();
});

test("the LIKE match finds a capitalized word of any script, as typed or not: SQLite folds ASCII only", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false, withoutFts: true });
  eachInASession(store, ["Привет, мир", "ÉCOLE normale", "école du soir"]);
  const found = async (q: string) => (await store.search("u", q, 10)).map((h) => h.session_id).sort();
  expect(await found("Привет")).toEqual(["s0"]);
  expect(await found("привет")).toEqual(["s0"]);
  expect(await found("École")).toEqual(["s1", "s2"]);
  store.close();
  // A query with a word of an unspaced script takes the LIKE match with FTS5 too.
  using fts = tmpdir();
  const indexed = Store.open(fts.path, { chunkThread: false });
  eachInASession(indexed, ["Éva à 東京"]);
  expect((await indexed.search("u", "東京 éva", 10)).map((h) => h.snippet)).toEqual(["**Éva** à **東京**"]);
  indexed.close();
});

test("the LIKE match finds a word whose capital lower-cases to two characters, typed as the text has it (İstanbul)", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false, withoutFts: true });
  // "İ".toLowerCase() is i and a combining dot: capitalized again, it is I and the dot, not the İ the text holds.
  eachInASession(store, ["İstanbul'da bir gün", "İSTANBUL"]);
  const found = async (q: string) => (await store.search("u", q, 10)).map((h) => h.session_id).sort();
  expect(await found("İstanbul")).toEqual(["s0", "s1"]);
  store.close();
});

test("the LIKE match finds an accented word composed or decomposed, whichever the text has (café, macOS's cafe and U+0301)", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false, withoutFts: true });
  eachInASession(store, ["un caf\u00e9 noir", "un cafe\u0301 au lait"]);
  const found = async (q: string) => (await store.search("u", q, 10)).map((h) => h.session_id).sort();
  expect(await found("caf\u00e9")).toEqual(["s0", "s1"]);
  expect(await found("cafe\u0301")).toEqual(["s0", "s1"]);
  store.close();
});
