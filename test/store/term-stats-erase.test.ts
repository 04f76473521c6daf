import { expect, test } from "bun:test";
import { Store } from "../../src/store/store.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// Recall keeps each word's count of documents ten minutes (store/term-stats.ts), keyed by the
// words of users' queries. users.delete left them: the deleted user's words stayed in the core's
// memory, and their counts, made of the erased rows, went on deciding other users' recalls.
/** A turn of `userId` in its own session, remembered as `text`. */
const turnOf = (store: Store) => (userId: string, sessionId: string, text: string) =>
  store.conversations.commitTurn({
    userId,
    sessionId,
    agent: "a",
    messages: [{ role: "user", content: text }],
    memoryText: text,
    at: new Date(),
  });

test("users.delete forgets the word counts its rows made: another user's recall is not ruled by them", async () => {
  using dir = tmpdir("local-ai-term-erase-");
  const store = Store.open(dir.path, { chunkThread: false });
  const turn = turnOf(store);
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

/**
 * A store past the small index (2,000) with "zebra" in over a tenth of the documents, the chunks of
 * library document doc-1 (committed or not). `erase` removes them; a recall of "zebra okapi" by
 * "u" must find its zebra turn again after it, not only before.
 */
async function zebrasGone(committed: boolean, erase: (store: Store) => Promise<unknown>): Promise<void> {
  using dir = tmpdir("local-ai-term-erase-");
  const store = Store.open(dir.path, { chunkThread: false });
  const turn = turnOf(store);
  try {
    for (let i = 0; i < 1700; i++) turn("u", `f${i}`, `filler ${i}`);
    turn("u", "a", "my zebra is called Ziggy");
    turn("u", "b", "the okapi lives in the forest");
    const doc = { documentId: "doc-1", userId: "lib", sessionId: "", since: 0, at: Date.now() };
    const chunks = Array.from({ length: 400 }, (_, index) => ({ index, text: `zebra stripes ${index}` }));
    store.documents.addChunks(doc, chunks);
    if (committed)
      store.documents.commit(doc, { name: "zebras.md", format: "markdown", chunks: 400, bytes: 1 });
    const recall = () => store.memory.search("u", "zebra okapi", 5, "now").map((h) => h.doc.text);
    expect(recall()).toEqual(["the okapi lives in the forest"]);
    await erase(store);
    expect(recall().sort()).toEqual(["my zebra is called Ziggy", "the okapi lives in the forest"]);
  } finally {
    store.close();
  }
}

// documents.delete records no erase (no turn is refused for it), so the counts its chunks made
// went on leaving a word out of every user's recall as too common for ten minutes.
test("documents.delete forgets the word counts its chunks made: a recall is not ruled by them", async () => {
  await zebrasGone(true, async (store) => expect(await store.deleteDocument("lib", "doc-1")).toBe(true));
});

// An add that failed or was cancelled has its chunks discarded (Store.discardAdd), no erase
// recorded either: their counts, made while the add ran (a recall counts every row of the index,
// committed or not), went on leaving the word out of every user's recall for ten minutes.
test("a discarded add forgets the word counts its chunks made: a recall is not ruled by them", async () => {
  await zebrasGone(false, async (store) => expect(await store.discardAdd("doc-1")).toBe(400));
});
