import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { indexRowCount } from "../../../src/store/db/fts-forget.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { eraseFromCopies } from "../../../src/store/erase-copies.ts";
import { Store } from "../../../src/store/store.ts";
import { commitNotedTurn } from "../../fixtures/noted-turn.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A database written where SQLite had no FTS5 (or before the indexes) gets its indexes built
// when it is opened where FTS5 is (store/db/open.ts). That build indexed every message, tool
// results included, which the triggers never index and so never take out: a delete left the
// words of a tool's result (a file read, a web page) in the index for good, and a message of
// another user given the erased row's id was found by them.

/** A turn of `userId` whose tool read a file holding `secret`. */
const toolTurn = (store: Store, userId: string, sessionId: string, secret: string) =>
  store.conversations.commitTurn({
    userId,
    sessionId,
    agent: "a",
    messages: [
      { role: "user", content: "read my notes" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "c1", type: "function", function: { name: "read_file", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: `the notes say ${secret}` },
      { role: "assistant", content: "done" },
    ],
    at: new Date(),
  });

/** How many rows the messages index of the database at `file` has `word` for, read through a connection of its own. */
function indexedIn(file: string, word: string): number {
  const db = new Database(file);
  try {
    return db.query("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?").all(`"${word}"`).length;
  } finally {
    db.close();
  }
}

const indexed = (dir: string, word: string) => indexedIn(join(dir, DB_FILE), word);

test("indexes built after a run without FTS5 hold the words a delete takes out, no tool result's", async () => {
  using dir = tmpdir();
  const plain = Store.open(dir.path, { withoutFts: true, chunkThread: false });
  toolTurn(plain, "ann", "s", "zanzibarcode");
  plain.close();
  const full = Store.open(dir.path, { chunkThread: false });
  try {
    expect(full.fts).toBe(true);
    // As the triggers index them: the user's and the answers' words only.
    expect(indexed(dir.path, "notes")).toBe(1);
    expect(indexed(dir.path, "zanzibarcode")).toBe(0);
    await full.deleteUser("ann");
    expect(indexed(dir.path, "read")).toBe(0);
    expect(indexed(dir.path, "zanzibarcode")).toBe(0);
    // Another user's message, maybe at an erased row's id, is not found by the erased words.
    commitNotedTurn(full, "bob", "b", "hello");
    commitNotedTurn(full, "bob", "b", "one");
    expect(await full.search("bob", "zanzibarcode", 10)).toEqual([]);
  } finally {
    full.close();
  }
});

// The same build runs after an erase whose page keys a merge cannot take out (an index of one
// segment, store/db/fts-forget.ts): from then on a tool's result was in the index, and stayed
// there after its session's delete.
test("an index rebuilt after an erase holds no tool result, and a delete leaves none of it", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false });
  try {
    toolTurn(store, "ann", "tools", "zanzibarcode");
    for (let i = 0; i < 40; i++) commitNotedTurn(store, "bob", `b${i}`, `bob talks about plums ${i}`);
    // 600 words each, some of them beginning index pages; 10 turns: an erase row by row.
    for (let m = 0; m < 10; m++)
      commitNotedTurn(
        store,
        "ann",
        "private",
        Array.from({ length: 600 }, (_, k) => `qzann${m * 600 + k}`).join(" "),
      );
    const db = new Database(join(dir.path, DB_FILE));
    db.run("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')");
    db.close();
    expect(indexed(dir.path, "zanzibarcode")).toBe(0);
    expect((await store.deleteSession("ann", "private")).deleted).toBe(true);
    // The one segment was built anew from the rows, as the triggers index them.
    expect(indexed(dir.path, "plums")).toBe(40);
    expect(indexed(dir.path, "zanzibarcode")).toBe(0);
    expect((await store.deleteSession("ann", "tools")).deleted).toBe(true);
    expect(indexed(dir.path, "zanzibarcode")).toBe(0);
    expect(indexed(dir.path, "notes")).toBe(0);
  } finally {
    store.close();
  }
});

// A database whose index an earlier core built so holds tool results still: FTS5 cannot take
// out a row's words once the row is gone. Opened by this version, its index is built anew once.
test("an index an earlier version built with tool results is built anew once: an erase then leaves none", async () => {
  using dir = tmpdir();
  // As an earlier core left it: built by FTS5's rebuild, never checked (no mark in meta).
  rebuiltAsEarlier(dir.path, UNCHECKED);
  expect(indexed(dir.path, "zanzibarcode")).toBe(1);
  const before = schemaOf(dir.path);
  const store = Store.open(dir.path, { chunkThread: false });
  try {
    expect(indexed(dir.path, "zanzibarcode")).toBe(0);
    // The same schema: a core of the version before still opens it (a host's rollback).
    expect(schemaOf(dir.path)).toBe(before);
    expect(indexed(dir.path, "notes")).toBe(1);
    expect((await store.deleteUser("ann")).deleted_sessions).toBe(1);
    expect(indexed(dir.path, "notes")).toBe(0);
  } finally {
    store.close();
  }
});

// A database set aside after damage is scrubbed of what a delete erases (store/erase-copies.ts),
// its index as an earlier version built it: the tool results in it stayed in the copy's file.
test("a copy set aside whose index holds tool results keeps none of an erased user's words", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false });
  toolTurn(store, "ann", "tools", "zanzibarcode");
  commitNotedTurn(store, "bob", "b", "bob keeps this");
  store.close();
  const copy = join(dir.path, `${DB_FILE}.corrupt-2026-01-01T00-00-00-000Z`);
  renameSync(join(dir.path, DB_FILE), copy);
  const db = new Database(copy);
  db.run("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')");
  db.close();
  expect(eraseFromCopies(dir.path, "ann").map((c) => c.outcome)).toEqual(["scrubbed"]);
  expect(readFileSync(copy).includes("zanzibarcode")).toBe(false);
  expect(indexedIn(copy, "bob")).toBe(1);
});

// The row of an erased tool result left in the index under its id; SQLite gives the highest ids
// again once their rows are gone, so another user's next message took that id, and the check by
// id found a user's message there: the index kept the erased words, and that message was found
// by them in sessions.search.
test("an index whose erased tool result's id another user's message took is built anew too", async () => {
  using dir = tmpdir();
  // As an earlier core left it: built by FTS5's rebuild, then ann erased (no trigger for her tool result).
  rebuiltAsEarlier(
    dir.path,
    "DELETE FROM messages WHERE user_id = 'ann'",
    "DELETE FROM sessions WHERE user_id = 'ann'",
  );
  const mid = Store.open(dir.path, { chunkThread: false });
  // Two turns of two messages: the ids ann's four rows had, the tool result's among them.
  commitNotedTurn(mid, "bob", "b", "hello");
  commitNotedTurn(mid, "bob", "b", "one");
  mid.close();
  // Unchecked, as that core left it; this core's open checks it.
  unchecked(dir.path);
  const before = indexed(dir.path, "zanzibarcode");
  const store = Store.open(dir.path, { chunkThread: false });
  try {
    expect([before, indexed(dir.path, "zanzibarcode")]).toEqual([1, 0]);
    expect(await store.search("bob", "zanzibarcode", 10)).toEqual([]);
    expect(indexed(dir.path, "hello")).toBe(1);
  } finally {
    store.close();
  }
});

/** Ann's tool turn in a database at `dir` whose messages index FTS5's own 'rebuild' built, then `sql` run on it. */
function rebuiltAsEarlier(dir: string, ...sql: string[]): void {
  const old = Store.open(dir, { chunkThread: false });
  toolTurn(old, "ann", "tools", "zanzibarcode");
  old.close();
  const db = new Database(join(dir, DB_FILE));
  db.run("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')");
  for (const s of sql) db.run(s);
  db.close();
}

/** An earlier version never marked its index checked (store/db/open.ts `repaired`). */
const UNCHECKED = "DELETE FROM meta WHERE key = 'fts_roles_checked'";

function schemaOf(dir: string): number {
  const db = readDb(join(dir, DB_FILE));
  try {
    return (db.query("PRAGMA user_version").get() as { user_version: number }).user_version;
  } finally {
    db.close();
  }
}

function unchecked(dir: string): void {
  const db = new Database(join(dir, DB_FILE));
  db.run(UNCHECKED);
  db.close();
}

// The count read from FTS5's totals record (a varint of more than one byte past 127 rows) agrees
// with the size entries of an index the triggers kept: no rebuild of a sound index at the open.
test("a sound index's row count is its size entries'", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path, { chunkThread: false });
  try {
    for (let i = 0; i < 100; i++) commitNotedTurn(store, "bob", `b${i}`, `bob ${i}`);
    toolTurn(store, "ann", "tools", "zanzibarcode");
    const db = new Database(join(dir.path, DB_FILE));
    const sized = (db.query("SELECT COUNT(*) AS n FROM messages_fts_docsize").get() as { n: number }).n;
    expect(sized).toBe(203);
    expect(indexRowCount(db, "messages_fts")).toBe(sized);
    db.close();
  } finally {
    store.close();
  }
});
