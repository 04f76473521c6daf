import type { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import {
  BULK_MIN_ROWS,
  BULK_SHARE,
  FTS_TABLES,
  forgettingRows,
  ftsSecureDeleteSet,
  staleIndexKeys,
} from "../../../src/store/db/fts-forget.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { commitNotedTurn } from "../../fixtures/noted-turn.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/** How FTS5 forgets an erase's words (store/db/fts-forget.ts): row by row, or by merging the index. */

/** The statements `db.run` is given from now on (the merge is one of them). */
function recordRuns(db: Database): string[] {
  const runs: string[] = [];
  const run = db.run.bind(db);
  db.run = ((sql: string, ...rest: never[]) => {
    runs.push(sql);
    return run(sql, ...rest);
  }) as typeof db.run;
  return runs;
}

/** Sixty words of 4–9 letters a call, the same from the same seed: an index of many pages. */
function fillerText(seed: number): () => string {
  let state = seed;
  const next = () => {
    state = (state * 1103515245 + 12345) & 0x7fffffff;
    return state;
  };
  const letter = () => "abcdefghijklmnoprstuvw"[(next() >> 8) % 22];
  return () =>
    Array.from({ length: 60 }, () => Array.from({ length: 4 + (next() % 6) }, letter).join("")).join(" ");
}

const dbOf = (store: Store) => (store as unknown as { db: Database }).db;
const merged = (runs: string[]) => runs.some((sql) => sql.includes("'optimize'"));

function indexIntact(db: Database): void {
  for (const t of ["messages_fts", "memory_fts"]) db.run(`INSERT INTO ${t}(${t}) VALUES ('integrity-check')`);
}

const aboutTurn = (store: Store, u: string, s: string, text: string) =>
  commitNotedTurn(store, u, s, text, `about ${text}`);

/**
 * `n` turns by `add`, 50 to a transaction: the index still grows by many segments and merges,
 * at a fraction of a commit per turn (most of these tests' time).
 */
function turns(store: Store, n: number, add: (i: number) => void): void {
  for (let i = 0; i < n; i += 50) {
    dbOf(store).transaction(() => {
      for (let j = i; j < Math.min(n, i + 50); j++) add(j);
    })();
  }
}

describe("an erase's words forgotten (store/db/fts-forget.ts)", () => {
  test("users.delete of most of the index merges it: no word left in any file, the rest still found, secure-delete on again", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    for (let i = 0; i < 30; i++) aboutTurn(store, "ann", `s${i % 3}`, `AARDVARK${i} burrows at night ${i}`);
    aboutTurn(store, "bob", "b", "the okapi stays");
    const runs = recordRuns(dbOf(store));
    expect((await store.deleteUser("ann")).deleted_sessions).toBe(3);
    expect(merged(runs)).toBe(true);
    expect(ftsSecureDeleteSet(dbOf(store))).toBe(true);
    indexIntact(dbOf(store));
    expect((await store.search("bob", "okapi", 5)).map((h) => h.session_id)).toEqual(["b", "b"]);
    expect(await store.search("ann", "burrows", 5)).toEqual([]);
    store.close();
    expect(filesHolding(dir.path, "AARDVARK")).toEqual([]);
    expect(filesHolding(dir.path, "aardvark")).toEqual([]);
  });

  test("a session small beside the index goes row by row (no merge of the whole index)", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    const other = Math.ceil((2 * BULK_MIN_ROWS) / BULK_SHARE);
    const doc = { documentId: "d", userId: "bob", sessionId: "", since: 0, at: Date.now() };
    for (let i = 0; i < other; i += 1000)
      store.documents.addChunks(
        doc,
        Array.from({ length: Math.min(1000, other - i) }, (_, k) => ({ index: i + k, text: `filler ${k}` })),
      );
    store.documents.commit(doc, { name: "d.txt", format: "text", chunks: other, bytes: other });
    // 11 turns: 33 rows, at least BULK_MIN_ROWS, under BULK_SHARE of the index.
    for (let i = 0; i < 11; i++) aboutTurn(store, "ann", "s", `PANGOLIN${i} walks`);
    const runs = recordRuns(dbOf(store));
    expect((await store.deleteSession("ann", "s")).deleted).toBe(true);
    expect(merged(runs)).toBe(false);
    indexIntact(dbOf(store));
    store.close();
    expect(filesHolding(dir.path, "PANGOLIN")).toEqual([]);
  }, 30_000);

  test("documents.delete of a big document merges the index too, and leaves no word of it", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    aboutTurn(store, "ann", "s", "the quokka smiles");
    const doc = { documentId: "book", userId: "ann", sessionId: "", since: 0, at: Date.now() };
    store.documents.addChunks(
      doc,
      Array.from({ length: 200 }, (_, k) => ({ index: k, text: `chapter ${k} of the NARWHAL${k} saga` })),
    );
    store.documents.commit(doc, { name: "book.txt", format: "text", chunks: 200, bytes: 1 });
    const runs = recordRuns(dbOf(store));
    expect(await store.deleteDocument("ann", "book")).toBe(true);
    // Only the index it touched: a document's chunks are memory rows.
    expect(runs.filter((sql) => sql.includes("'optimize'"))).toEqual([
      "INSERT INTO memory_fts(memory_fts) VALUES ('optimize')",
    ]);
    indexIntact(dbOf(store));
    expect(await store.search("ann", "quokka", 5)).toHaveLength(2);
    store.close();
    expect(filesHolding(dir.path, "NARWHAL")).toEqual([]);
    expect(filesHolding(dir.path, "narwhal")).toEqual([]);
  });

  test("an edit at the start of a long session merges the index for its tail: none of the tail in any file", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    for (let i = 0; i < 30; i++) aboutTurn(store, "ann", "s", `WOMBAT${i} digs`);
    aboutTurn(store, "bob", "b", "the okapi stays");
    const runs = recordRuns(dbOf(store));
    store.conversations.commitTurn({
      userId: "ann",
      sessionId: "s",
      agent: "a",
      messages: [
        { role: "user", content: "edited" },
        { role: "assistant", content: "anew" },
      ],
      replaceFromSeq: 0,
      at: new Date(),
    });
    expect(merged(runs)).toBe(true);
    expect(ftsSecureDeleteSet(dbOf(store))).toBe(true);
    indexIntact(dbOf(store));
    expect(await store.search("ann", "anew", 5)).toHaveLength(1);
    store.close();
    expect(filesHolding(dir.path, "WOMBAT")).toEqual([]);
    expect(filesHolding(dir.path, "wombat")).toEqual([]);
  });

  test("a small erase row by row leaves no page key of the index that was an erased word (FTS5's %_idx)", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    const filler = fillerText(42);
    const plain = (u: string, s: string, text: string) => aboutTurn(store, u, s, text);
    const secret = (who: string, m: number) =>
      Array.from({ length: 600 }, (_, k) => `qz${who}${m * 600 + k}`).join(" ");
    turns(store, 3000, (i) => plain("bob", `b${i % 20}`, filler()));
    // 30 rows each (under BULK_MIN_ROWS): secure-delete, row by row. 600 words each: some begin pages.
    for (let m = 0; m < 10; m++) plain("ann", "private", secret("ann", m));
    for (let m = 0; m < 10; m++) plain("dan", "private", secret("dan", m));
    turns(store, 1000, (i) => plain("bob", `b${i % 20}`, filler()));
    const keys = (who: string) =>
      dbOf(store)
        .query(
          `SELECT CAST(term AS TEXT) AS t FROM messages_fts_idx WHERE CAST(term AS TEXT) LIKE '%qz${who}%'`,
        )
        .all();
    expect(keys("ann").length).toBeGreaterThan(0);
    expect(keys("dan").length).toBeGreaterThan(0);
    const runs = recordRuns(dbOf(store));
    expect((await store.deleteSession("ann", "private")).deleted).toBe(true);
    expect(merged(runs)).toBe(true);
    expect(keys("ann")).toEqual([]);
    // The index is one segment now, which a merge leaves as it is: dan's erase rebuilds it.
    expect(dbOf(store).query("SELECT count(DISTINCT segid) AS n FROM messages_fts_idx").get()).toEqual({
      n: 1,
    });
    expect((await store.deleteSession("dan", "private")).deleted).toBe(true);
    expect(keys("dan")).toEqual([]);
    expect(staleIndexKeys(dbOf(store), "messages_fts")).toEqual([]);
    indexIntact(dbOf(store));
    store.close();
    expect(filesHolding(dir.path, "qzann")).toEqual([]);
    expect(filesHolding(dir.path, "qzdan")).toEqual([]);
  }, 60_000);

  test("page keys cut inside a character are not taken for erased words (nothing erased, nothing stale)", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    let state = 11;
    const next = () => {
      state = (state * 1103515245 + 12345) & 0x7fffffff;
      return state;
    };
    const letter = () => "абвгдежзиклмнопрстуфхцчшщыэюя"[(next() >> 8) % 29];
    const text = () =>
      Array.from({ length: 60 }, () => Array.from({ length: 3 + (next() % 6) }, letter).join("")).join(" ");
    turns(store, 1500, (i) => aboutTurn(store, "ivan", `s${i % 10}`, text()));
    const multiByteCut = dbOf(store)
      .query(
        "SELECT count(*) AS n FROM messages_fts_idx WHERE CAST(term AS TEXT) LIKE '%' || char(65533) || '%'",
      )
      .get() as { n: number };
    expect(multiByteCut.n).toBeGreaterThan(0);
    expect(staleIndexKeys(dbOf(store), "messages_fts")).toEqual([]);
    store.close();
  }, 60_000);

  test("an add cancelled after its chunks were written leaves no page key that was its word either", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    const filler = fillerText(7);
    const add = async (user: string, id: string, texts: string[], commit = true) => {
      const doc = { documentId: id, userId: user, sessionId: "", since: 0, at: Date.now() };
      await store.writeChunks(
        doc,
        texts.map((text, index) => ({ index, text })),
      );
      if (commit) store.documents.commit(doc, { name: id, format: "text", chunks: texts.length, bytes: 1 });
    };
    await add("bob", "b1", Array.from({ length: 3000 }, filler));
    const words = (m: number) => Array.from({ length: 600 }, (_, k) => `qzcancel${m * 600 + k}`).join(" ");
    await add(
      "ann",
      "cancelled",
      Array.from({ length: 10 }, (_, m) => words(m)),
      false,
    );
    await add("bob", "b2", Array.from({ length: 1000 }, filler));
    expect(await store.discardAdd("cancelled")).toBe(10);
    expect(staleIndexKeys(dbOf(store), "memory_fts")).toEqual([]);
    store.close();
    expect(filesHolding(dir.path, "qzcancel")).toEqual([]);
  }, 60_000);

  test("without room on the disk for the merge, or with a failure midway, it goes as before", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path, { chunkThread: false });
    for (let i = 0; i < 20; i++) aboutTurn(store, "ann", "s", `IBEX${i} climbs`);
    const db = dbOf(store);
    const runs = recordRuns(db);
    const remove = () => db.query("DELETE FROM memory WHERE user_id = 'ann' AND seq < 10").run().changes;
    // No room: row by row.
    expect(db.transaction(() => forgettingRows(db, 1000, remove, FTS_TABLES, () => false))()).toBe(5);
    expect(merged(runs)).toBe(false);
    // A failure after secure-delete was turned off: the transaction rolls back, and with it the switch.
    const failing = () => {
      remove();
      throw new Error("midway");
    };
    expect(() => db.transaction(() => forgettingRows(db, 1000, failing, FTS_TABLES, () => true))()).toThrow(
      "midway",
    );
    expect(ftsSecureDeleteSet(db)).toBe(true);
    db.run("DELETE FROM memory WHERE user_id = 'ann'");
    db.run("DELETE FROM sessions WHERE user_id = 'ann'");
    indexIntact(db);
    store.close();
    expect(filesHolding(dir.path, "IBEX")).toEqual([]);
    expect(filesHolding(dir.path, "ibex")).toEqual([]);
  });
});
