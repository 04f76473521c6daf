import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { readFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { eraseFromCopies } from "../../../src/store/erase-copies.ts";
import { Store } from "../../../src/store/store.ts";
import { commitNotedTurn } from "../../fixtures/noted-turn.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A database made where SQLite had FTS5, opened by a core whose SQLite has not: its indexes stay
// in the file (their triggers dropped, store/db/open.ts), each message's words in them.
test("an erase where FTS5 is not leaves none of the user's words in the indexes FTS5 built", async () => {
  using dir = tmpdir();
  annAndBob(dir.path);
  const plain = Store.open(dir.path, { withoutFts: true, chunkThread: false });
  try {
    expect(plain.fts).toBe(false);
    expect((await plain.deleteUser("ann")).deleted_sessions).toBe(1);
  } finally {
    plain.close();
  }
  expect(readFileSync(join(dir.path, DB_FILE)).includes("zanzibarcode")).toBe(false);
  // FTS5 back: the indexes built anew from the rows, bob's words found again.
  const back = Store.open(dir.path, { chunkThread: false });
  try {
    expect(back.fts).toBe(true);
    expect((await back.search("bob", "keeps", 10)).length).toBe(1);
    expect(await back.search("ann", "zanzibarcode", 10)).toEqual([]);
  } finally {
    back.close();
  }
});

// A copy set aside (store/erase-copies.ts) from a core that ran without FTS5 before this one
// emptied the indexes: their triggers dropped, every message's words still in them.
test("a copy set aside whose indexes lost their triggers keeps none of an erased user's words", () => {
  using dir = tmpdir();
  annAndBob(dir.path);
  const copy = join(dir.path, `${DB_FILE}.corrupt-2026-01-01T00-00-00-000Z`);
  renameSync(join(dir.path, DB_FILE), copy);
  // As an earlier core left it where SQLite had no FTS5 (store/db/open.ts upgrade).
  const db = new Database(copy);
  for (const t of ["messages_fts_insert", "messages_fts_delete", "memory_fts_insert", "memory_fts_delete"])
    db.run(`DROP TRIGGER ${t}`);
  db.run("UPDATE meta SET value = '0' WHERE key = 'fts'");
  db.close();
  expect(eraseFromCopies(dir.path, "ann").map((c) => c.outcome)).toEqual(["scrubbed"]);
  expect(readFileSync(copy).includes("zanzibarcode")).toBe(false);
});

/** Ann's turn with a word of hers and bob's, in a database at `dir` made where FTS5 is. */
function annAndBob(dir: string): void {
  const full = Store.open(dir, { chunkThread: false });
  commitNotedTurn(full, "ann", "s", "zanzibarcode is my pin");
  commitNotedTurn(full, "bob", "b", "bob keeps this");
  full.close();
}
