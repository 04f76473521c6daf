import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { Store } from "../../src/store/store.ts";
import { commitNotedTurn as turn } from "../fixtures/noted-turn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// What memory notes quote, asked of the database (store/quoted-sources.ts, docs/agent.md#prompt-reuse):
// a document by its row, a session and a folder's file by every quoted passage's row.

/** The memory rows of `source`, as the database holds them now. */
function rowsOf(store: Store, source: string): number[] {
  const raw = new Database(store.path);
  try {
    const rows = raw.query("SELECT id FROM memory WHERE source = ? ORDER BY id").all(source) as {
      id: number;
    }[];
    return rows.map((r) => r.id);
  } finally {
    raw.close();
  }
}

test("sources gone: an erased session, a deleted document, a file's passages dropped, an unknown kind", async () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  try {
    turn(store, "ann", "s0", "hello");
    const raw = new Database(store.path);
    const doc =
      "INSERT INTO documents (document_id, user_id, name, format, chunks, bytes, created_at) VALUES (?, 'ann', 'd', 'text', 1, 1, 0)";
    raw.query(doc).run("d1");
    const file = raw
      .query(
        "INSERT INTO memory (user_id, source, root, text, at) VALUES ('', 'file:a.md', '/r', 'x', 0) RETURNING id",
      )
      .get() as { id: number };
    raw.close();
    const quoted = new Map<string, number[]>([
      ["session:s0", rowsOf(store, "session:s0")],
      ["document:d1", []],
      ["file:a.md", [file.id]],
    ]);
    expect(store.sourcesGone("ann", quoted)).toEqual([]);
    // Another user's: none of them is bob's but the folder's file.
    expect(store.sourcesGone("bob", quoted)).toEqual(["session:s0", "document:d1"]);
    expect(
      store.sourcesGone(
        "ann",
        new Map([
          ["file:a.md", [file.id + 1]],
          ["other:x", []],
          // Quoted without its rows: it cannot be vouched for.
          ["session:s0", []],
        ]),
      ),
    ).toEqual(["file:a.md", "other:x", "session:s0"]);
    await store.deleteSession("ann", "s0");
    await store.deleteDocument("ann", "d1");
    expect(store.sourcesGone("ann", quoted)).toEqual(["session:s0", "document:d1"]);
  } finally {
    store.close();
  }
});

test("two folders with a file of the same name: one's passages dropped, a note quoting both is gone", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  try {
    const raw = new Database(store.path);
    const add = raw.query(
      "INSERT INTO memory (user_id, source, root, text, at) VALUES ('', 'file:a.md', ?, 'x', 0) RETURNING id",
    );
    const one = (add.get("/r1") as { id: number }).id;
    const two = (add.get("/r2") as { id: number }).id;
    raw.query("DELETE FROM memory WHERE id = ?").run(one);
    raw.close();
    expect(store.sourcesGone("ann", new Map([["file:a.md", [one, two]]]))).toEqual(["file:a.md"]);
  } finally {
    store.close();
  }
});
