import { expect, spyOn, test } from "bun:test";
import { Conversations } from "../../src/store/conversations.ts";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const MiB = 1024 * 1024;
/** store/session-pages.ts PAGE_BYTES. */
const PAGE_BYTES = 8 * MiB;

function paste(store: Store, input: string, answer: string) {
  store.conversations.commitTurn({
    userId: "u",
    sessionId: "big",
    agent: "assistant",
    messages: [
      { role: "user", content: input },
      { role: "assistant", content: answer },
    ],
    at: new Date(),
  });
}

test("sessions.get pages stop at PAGE_BYTES of JSON, at least one message each, and the cursor reaches every message", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  // Three 3 MiB pastes, and one whose control characters are 6 bytes each as JSON (\u0001).
  for (let i = 0; i < 3; i++) paste(store, `${i}`.repeat(3 * MiB), "ok");
  paste(store, "\u0001".repeat(2 * MiB), "ok");
  const seen: number[] = [];
  let before: number | undefined;
  for (;;) {
    const page = store.get("u", "big", 200, before);
    const bytes = Buffer.byteLength(JSON.stringify(page.messages));
    // Over the budget only as a page of one message.
    if (page.messages.length > 1) expect(bytes).toBeLessThanOrEqual(PAGE_BYTES);
    seen.unshift(...page.messages.map((m) => m.seq));
    if (!page.has_more) break;
    before = page.messages[0]!.seq;
  }
  expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  // The newest page: the escaped paste (12 MiB as JSON) is alone after its short answer.
  expect(store.get("u", "big", 200).messages.map((m) => m.seq)).toEqual([7]);
  expect(store.get("u", "big", 200, 7).messages.map((m) => m.seq)).toEqual([6]);
  expect(store.get("u", "big", 200, 6).messages.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
  store.close();
});

test("sessions.get reads one snapshot: an edit committed by another connection between its reads shows on no part of the page", () => {
  using dir = tmpdir();
  const store = Store.open(dir.path);
  // The store's thread, or another core: a connection of its own.
  const other = Store.open(dir.path);
  try {
    paste(store, "first", "one");
    paste(store, "second", "two");
    // Once the summary is read, the other connection replaces the session's every message.
    const original = Conversations.prototype.session;
    const session = spyOn(Conversations.prototype, "session").mockImplementation(function (
      this: Conversations,
      userId: string,
      sessionId: string,
    ) {
      const summary = original.call(this, userId, sessionId);
      session.mockRestore();
      other.conversations.commitTurn({
        userId,
        sessionId,
        agent: "assistant",
        messages: [{ role: "user", content: "edited" }],
        replaceFromSeq: 0,
        at: new Date(),
      });
      return summary;
    });
    const page = store.get("u", "big", 10);
    // The summary and the messages agree: the four messages from before the edit.
    expect([page.session.message_count, page.messages.map((m) => m.content)]).toEqual([
      4,
      ["first", "one", "second", "two"],
    ]);
    // The edit is there for the next read.
    expect(store.get("u", "big", 10).messages.map((m) => m.content)).toEqual(["edited"]);
  } finally {
    other.close();
    store.close();
  }
});
