import { expect, test } from "bun:test";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Recall keeps each word's count of documents ten minutes (store/term-stats.ts), keyed by the
// words of users' queries. users.delete left them: the deleted user's words stayed in the core's
// memory, and their counts, made of the erased rows, went on deciding other users' recalls.
test("users.delete forgets the word counts its rows made: another user's recall is not ruled by them", async () => {
  using dir = tmpdir("local-ai-term-erase-");
  const store = Store.open(dir.path, { chunkThread: false });
  const turn = (userId: string, sessionId: string, text: string) =>
    store.conversations.commitTurn({
      userId,
      sessionId,
      agent: "a",
      messages: [{ role: "user", content: text }],
      memoryText: text,
      at: new Date(),
    });
  try {
    // Past the small index (2,000), "zebra" in over a tenth of the documents, all but one "gone"'s.
    for (let i = 0; i < 2100; i++) turn("gone", `g${i}`, i < 400 ? `zebra stripes ${i}` : `filler ${i}`);
    turn("u", "a", "my zebra is called Ziggy");
    turn("u", "b", "the okapi lives in the forest");
    const recall = () => store.memory.search("u", "zebra okapi", 5, "now").map((h) => h.doc.text);
    // Common then: left out of the query for the rare "okapi".
    expect(recall()).toEqual(["the okapi lives in the forest"]);
    await store.deleteUser("gone");
    // The rows that made it common are gone: "zebra" is rare again and found.
    expect(recall().sort()).toEqual(["my zebra is called Ziggy", "the okapi lives in the forest"]);
  } finally {
    store.close();
  }
});
