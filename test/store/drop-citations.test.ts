import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { dropCitations } from "../../src/store/source-names.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// dropCitations (store/source-names.ts) looks for the cited id's JSON text before it parses an
// answer's sources: every id, however JSON escapes it, must still be found, and no other touched.
test("a cited session's citations go whatever its id's characters; another session's, another user's and earlier turns' stay", () => {
  using dir = tmpdir("local-ai-drop-citations-");
  Store.open(dir.path).close();
  const db = new Database(`${dir.path}/local-ai.db`);
  try {
    const ids = ['a"b', "c\\d", "é/ü\u2028", "x\u0001y", "😀", "s1"];
    const insert = db.query(
      "INSERT INTO messages (user_id, session_id, seq, role, content, created_at, sources) VALUES (?, 'q', ?, 'assistant', 'x', 0, ?)",
    );
    db.query(
      "INSERT INTO sessions (user_id, session_id, agent, title, created_at, updated_at) VALUES (?, 'q', 'a', 't', 0, 0)",
    ).run("u");
    db.query(
      "INSERT INTO sessions (user_id, session_id, agent, title, created_at, updated_at) VALUES (?, 'q', 'a', 't', 0, 0)",
    ).run("v");
    const cite = (id: string, chunk: number) => ({ kind: "turn", id, chunk, score: 1 });
    let seq = 0;
    for (const id of ids) {
      const sources = [
        cite(id, 0),
        cite(id, 4),
        cite("s10", 4),
        { kind: "document", id, chunk: 4, score: 1 },
      ];
      insert.run("u", seq++, JSON.stringify(sources));
      insert.run("v", seq++, JSON.stringify(sources));
    }
    for (const id of ids) expect(dropCitations(db, "u", id, -1, 2)).toBe(1);
    const rows = db.query("SELECT user_id, sources FROM messages ORDER BY seq").all() as {
      user_id: string;
      sources: string;
    }[];
    ids.forEach((id, i) => {
      // The turn from seq 2 on goes; the earlier turn, s10's, the document's and user v's stay.
      expect(JSON.parse(rows[2 * i]?.sources as string)).toEqual([
        cite(id, 0),
        cite("s10", 4),
        { kind: "document", id, chunk: 4, score: 1 },
      ]);
      expect(JSON.parse(rows[2 * i + 1]?.sources as string)).toHaveLength(4);
    });
  } finally {
    db.close();
  }
});
