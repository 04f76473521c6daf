import type { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import type { TurnMessage } from "../../../src/store/conversations.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const commit = (store: Store, messages: TurnMessage[], replaceFromSeq?: number) =>
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "s",
    agent: "a",
    messages,
    at: new Date(),
    ...(replaceFromSeq !== undefined ? { replaceFromSeq } : {}),
  });

// A count of the session's messages reads every row of it (`by_core` is in the row, past the
// text): 60-95 ms of the main loop for each turn of a 100,000-message session, ping unanswered.
test("a turn's commit counts its own messages onto the session's, not the session's all again", () => {
  using dir = tmpdir("local-ai-count-");
  const store = Store.open(dir.path, { chunkThread: false });
  try {
    commit(store, [
      { role: "user", content: "q1" },
      { role: "assistant", content: "a1" },
    ]);
    const db = (store as unknown as { db: Database }).db;
    const seen: string[] = [];
    const query = db.query.bind(db);
    db.query = ((sql: string) => {
      seen.push(sql);
      return query(sql);
    }) as typeof db.query;
    commit(store, [
      { role: "user", content: "q2" },
      { role: "assistant", content: "say it again" },
      { role: "user", content: "write again", by_core: true },
      { role: "assistant", content: "a2" },
    ]);
    expect(seen.filter((sql) => /COUNT\(\*\) FROM messages/.test(sql))).toEqual([]);
    // The core's own request to write again is not counted (sessions.* never show it).
    expect(store.conversations.session("u", "s")?.message_count).toBe(5);
    // An edit (off the loop where the store has its thread) counts the session again.
    commit(
      store,
      [
        { role: "user", content: "q2 again" },
        { role: "assistant", content: "a2'" },
      ],
      2,
    );
    expect(store.conversations.session("u", "s")?.message_count).toBe(4);
  } finally {
    store.close();
  }
});
