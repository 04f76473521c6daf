import { expect, test } from "bun:test";
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
