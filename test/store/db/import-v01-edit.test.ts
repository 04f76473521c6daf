import { expect, test } from "bun:test";
import { Store } from "../../../src/store/store.ts";
import { MemoryIndex } from "../../fixtures/store-v01/memory-index.ts";
import { SessionStore } from "../../fixtures/store-v01/session-store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A 0.1 memory entry names its session but no turn (seq NULL): an edit of the session's first
// message replaces every turn of it, so the entries of those turns go with them as a new core's do.
test("an edit from the first message of an imported session takes the session's 0.1 memory with it", async () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory([
    { role: "user", content: "plan a trip to Porto" },
    { role: "assistant", content: "Porto it is" },
  ]);
  const mem = MemoryIndex.forUser(dir.path, "ann").load();
  mem.addTurn({
    id: "x",
    session_id: "trip",
    text: "plan a trip to Porto\nPorto it is",
    at: "2026-11-30T10:00:00.000Z",
  });
  mem.addTurn({ id: "y", session_id: "other", text: "Porto wine notes", at: "2026-11-30T10:00:00.000Z" });
  const store = Store.open(dir.path);
  await store.whenImported();
  expect(
    store.memory
      .search("ann", "Porto", 5, "none")
      .map((h) => h.doc.source)
      .sort(),
  ).toEqual(["session:other", "session:trip"]);
  await store.writeOffLoop({
    kind: "commit",
    turn: {
      userId: "ann",
      sessionId: "trip",
      agent: "a",
      messages: [
        { role: "user", content: "plan a trip to Lisbon" },
        { role: "assistant", content: "Lisbon then" },
      ],
      replaceFromSeq: 0,
      memoryText: "plan a trip to Lisbon\nLisbon then",
      at: new Date(),
    },
  });
  // The replaced conversation is recalled no more; the other session's entry stays.
  expect(store.memory.search("ann", "Porto", 5, "none").map((h) => h.doc.source)).toEqual(["session:other"]);
  expect(store.memory.search("ann", "Lisbon", 5, "none").map((h) => h.doc.source)).toEqual(["session:trip"]);
  store.close();
});
