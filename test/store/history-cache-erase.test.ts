import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
import { DB_FILE } from "../../src/store/db/open.ts";
import { eraseSession } from "../../src/store/erase.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** The text of every history the core holds in memory (store/session-histories.ts). */
function cachedText(store: Store): string {
  const { cache } = store.conversations.histories as unknown as {
    cache: Map<string, { messages: ChatMessage[] }>;
  };
  return JSON.stringify([...cache.values()].map((c) => c.messages));
}

// An edit erases the tail it replaces as a delete erases a session; the store's thread commits it,
// so the history this core cached before it held that tail (never sent again: its stamp moved)
// until the session was next read, which may be never.
test("an edit committed on the store's thread leaves none of the tail it erased in the cached histories", async () => {
  using dir = tmpdir("local-ai-history-erase-");
  const store = Store.open(dir.path);
  try {
    const at = new Date();
    store.conversations.commitTurn({
      userId: "u",
      sessionId: "s",
      agent: "a",
      at,
      messages: [
        { role: "user", content: "q1" },
        { role: "assistant", content: "a1" },
        { role: "user", content: "my card is 4111-1111" },
        { role: "assistant", content: "noted" },
      ],
    });
    expect(store.conversations.history("u", "s")).toHaveLength(4);
    expect(cachedText(store)).toContain("4111-1111");
    const turn = {
      userId: "u",
      sessionId: "s",
      agent: "a",
      at,
      replaceFromSeq: 2,
      messages: [
        { role: "user", content: "never mind" },
        { role: "assistant", content: "ok" },
      ] as ChatMessage[],
    };
    await store.writeOffLoop({ kind: "commit", turn });
    expect(cachedText(store)).not.toContain("4111-1111");
    expect(store.conversations.history("u", "s").map((m) => m.content)).toEqual([
      "q1",
      "a1",
      "never mind",
      "ok",
    ]);
  } finally {
    await store.stop();
  }
});

// Another core on the same folder deletes a session this one has cached: the erase's number moves
// its stamp, so it is never sent again, but its messages stayed in this core's memory for as long
// as 15 other sessions did not push them out.
test("a session another core deleted leaves this core's cached histories at its next read", () => {
  using dir = tmpdir("local-ai-history-erase-");
  const store = Store.open(dir.path, { chunkThread: false });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    const commit = (sessionId: string, content: string) =>
      store.conversations.commitTurn({
        userId: "u",
        sessionId,
        agent: "a",
        at: new Date(),
        messages: [
          { role: "user", content },
          { role: "assistant", content: "ok" },
        ],
      });
    commit("s", "my card is 4111-1111");
    commit("t", "hello");
    expect(store.conversations.history("u", "s")).toHaveLength(2);
    expect(cachedText(store)).toContain("4111-1111");
    other.run("PRAGMA foreign_keys = ON");
    expect(eraseSession(other, "u", "s", Date.now())).toBe(true);
    expect(store.conversations.history("u", "t")).toHaveLength(2);
    expect(cachedText(store)).not.toContain("4111-1111");
  } finally {
    other.close();
    store.close();
  }
});
