import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { insertPassages } from "../../src/store/folder-rows.ts";
import type { TextFile } from "../../src/store/folder-walk.ts";
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

/** A store on a fresh folder, closed after `use`. */
function withStore(use: (store: Store) => void): void {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  try {
    use(store);
  } finally {
    store.close();
  }
}

test("a session's last turn replaced (its row stays, the new memory row takes no erased id): a note of it is gone", () =>
  withStore((store) => {
    turn(store, "ann", "s0", "first");
    turn(store, "ann", "s0", "second");
    const [first, second] = rowsOf(store, "session:s0") as [number, number];
    // The second turn (seq 2 on) replaced, as `replace_from: 2` does.
    turn(store, "ann", "s0", "again", "noted", 2);
    expect(store.sourcesGone("ann", new Map([["session:s0", [first]]]))).toEqual([]);
    expect(store.sourcesGone("ann", new Map([["session:s0", [first, second]]]))).toEqual(["session:s0"]);
  }));

test("a folder's file indexed again: its new passages take no id of the old, so a note of those is gone", () =>
  withStore((store) => {
    const file: TextFile = { path: "/r/a.md", size: 1, mtimeMs: 1 };
    const raw = new Database(store.path);
    insertPassages(raw, "/r", [{ file, parts: ["old words", "more"] }]);
    const old = rowsOf(store, "file:a.md");
    insertPassages(raw, "/r", [{ file: { ...file, mtimeMs: 2 }, parts: ["new words", "more"] }]);
    raw.close();
    expect(rowsOf(store, "file:a.md").filter((id) => old.includes(id))).toEqual([]);
    expect(store.sourcesGone("ann", new Map([["file:a.md", old]]))).toEqual(["file:a.md"]);
  }));
