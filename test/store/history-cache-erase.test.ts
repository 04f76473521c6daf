import { expect, test } from "bun:test";
import type { ChatMessage } from "../../src/protocol/chat-message.ts";
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
