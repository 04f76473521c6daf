import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { Store } from "../../../src/store/store.ts";
import { commitNotedTurn } from "../../fixtures/noted-turn.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A database made where SQLite had FTS5, opened by a core whose SQLite has not: its indexes stay
// in the file (their triggers dropped, store/db/open.ts), each message's words in them.
test("an erase where FTS5 is not leaves none of the user's words in the indexes FTS5 built", async () => {
  using dir = tmpdir();
  const full = Store.open(dir.path, { chunkThread: false });
  commitNotedTurn(full, "ann", "s", "zanzibarcode is my pin");
  commitNotedTurn(full, "bob", "b", "bob keeps this");
  full.close();
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
