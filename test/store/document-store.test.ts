import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import type { PendingDocument } from "../../src/store/document-store.ts";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { commitNotedTurn as turn } from "../fixtures/noted-turn.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A document committed straight through the store: its chunks, then its row. */
function addDoc(
  store: Store,
  id: string,
  userId: string,
  sessionId: string,
  texts: string[],
): PendingDocument {
  const doc = { documentId: id, userId, sessionId, since: store.conversations.erasureMark(), at: Date.now() };
  store.documents.addChunks(
    doc,
    texts.map((text, index) => ({ index, text })),
  );
  expect(
    store.documents.commit(doc, { name: `${id}.md`, format: "markdown", chunks: texts.length, bytes: 10 }),
  ).toBe(true);
  return doc;
}

/** Files under `dir` holding `marker`. */

const kinds = (store: Store, user: string, q: string, session?: string) =>
  store.memory
    .search(user, q, 10, session)
    .map((h) => `${h.cite.kind}:${h.cite.id}:${h.cite.chunk}`)
    .sort();

describe("documents in the store: scope, citations, erase", () => {
  test("a chat recalls the user's library and its own session's attachments, never another session's or user's", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "ann", "s1", "the OKAPI lives in the forest");
    turn(store, "ann", "s2", "hello");
    turn(store, "bob", "b1", "hello");
    addDoc(store, "lib", "ann", "", ["intro", "an OKAPI in the library"]);
    addDoc(store, "att1", "ann", "s1", ["an OKAPI attached to s1"]);
    addDoc(store, "att2", "ann", "s2", ["an OKAPI attached to s2"]);
    addDoc(store, "bobs", "bob", "", ["bob's OKAPI"]);
    // From s2: s1's turn, the library, s2's attachment; not s1's attachment, nothing of bob's.
    expect(kinds(store, "ann", "okapi", "s2")).toEqual(["document:att2:0", "document:lib:1", "turn:s1:0"]);
    // From s1: its own turn is history, not memory.
    expect(kinds(store, "ann", "okapi", "s1")).toEqual(["document:att1:0", "document:lib:1"]);
    // Without a session: every turn, the library, no attachment.
    expect(kinds(store, "ann", "okapi")).toEqual(["document:lib:1", "turn:s1:0"]);
    expect(kinds(store, "bob", "okapi", "b1")).toEqual(["document:bobs:0"]);
    const [lib] = store.memory.search("ann", "library", 1, "s2");
    expect(lib?.cite).toMatchObject({ kind: "document", id: "lib", name: "lib.md", chunk: 1 });
    const [t] = store.memory.search("ann", "forest", 1, "s2");
    expect(t?.cite).toMatchObject({
      kind: "turn",
      id: "s1",
      name: "the OKAPI lives in the forest",
      chunk: 0,
    });
    expect(t?.cite.score).toBeGreaterThan(0);
    store.close();
  });

  test("a first turn that ends uncommitted keeps its session when a document is attached to it", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    store.conversations.ensureSession("ann", "new", "a", "hi", new Date());
    addDoc(store, "att", "ann", "new", ["ATTACHED to a session with no message yet"]);
    store.conversations.clearCheckpoint("ann", "new");
    expect(store.mustFind("ann", "new").message_count).toBe(0);
    await store.deleteSession("ann", "new");
    expect(store.documents.list("ann")).toEqual([]);
    store.close();
  });

  test("chunks not yet committed are never recalled; discard removes them", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const doc = { documentId: "p", userId: "ann", sessionId: "", since: 0, at: Date.now() };
    store.documents.addChunks(doc, [{ index: 0, text: "pending GNU text" }]);
    expect(store.memory.search("ann", "gnu", 5)).toEqual([]);
    expect(store.documents.list("ann")).toEqual([]);
    expect(store.documents.discard("p", 100)).toBe(1);
    // What the sweep looks at (store/orphan-sweep.ts): uncommitted documents and when they began.
    store.documents.addChunks(doc, [{ index: 0, text: "orphan" }]);
    addDoc(store, "c", "ann", "", ["committed"]);
    expect(store.documents.uncommitted()).toEqual([{ documentId: "p", at: doc.at }]);
    store.close();
  });

  test("list, delete, and the erases of a session and a user leave no chunk text in any file", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "ann", "s1", "hi");
    addDoc(store, "lib", "ann", "", ["LIBRARYWORD one"]);
    addDoc(store, "att", "ann", "s1", ["ATTACHWORD two"]);
    addDoc(store, "gone", "ann", "", ["DELETEDWORD three"]);
    expect(
      store.documents
        .list("ann")
        .map((d) => `${d.document_id}:${d.session_id}`)
        .sort(),
    ).toEqual(["att:s1", "gone:null", "lib:null"]);
    expect(store.documents.list("ann", "s1").map((d) => d.document_id)).toEqual(["att"]);
    // A copy of the database as a reset would have set it aside: the delete reaches it too.
    const aside = join(dir.path, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z");
    for (const suffix of ["", "-wal"])
      if (existsSync(join(dir.path, `local-ai.db${suffix}`)))
        copyFileSync(join(dir.path, `local-ai.db${suffix}`), `${aside}${suffix}`);
    expect(filesHolding(dir.path, "DELETEDWORD").length).toBeGreaterThan(1);
    expect(await store.deleteDocument("ann", "gone")).toBe(true);
    expect(await store.deleteDocument("ann", "gone")).toBe(false);
    expect(await store.deleteDocument("bob", "lib")).toBe(false);
    expect(filesHolding(dir.path, "DELETEDWORD")).toEqual([]);
    await store.deleteSession("ann", "s1");
    expect(store.documents.list("ann").map((d) => d.document_id)).toEqual(["lib"]);
    expect(filesHolding(dir.path, "ATTACHWORD")).toEqual([]);
    expect(filesHolding(dir.path, "LIBRARYWORD").length).toBeGreaterThan(0);
    await store.deleteUser("ann");
    expect(store.documents.list("ann")).toEqual([]);
    expect(filesHolding(dir.path, "LIBRARYWORD")).toEqual([]);
    store.close();
  });

  test("an erase after the add began refuses its later writes, from this core or another", async () => {
    using dir = tmpdir();
    const a = Store.open(dir.path);
    const b = Store.open(dir.path);
    turn(a, "ann", "s1", "hi");
    const lib = {
      documentId: "x",
      userId: "ann",
      sessionId: "",
      since: a.conversations.erasureMark(),
      at: Date.now(),
    };
    const att = { ...lib, documentId: "y", sessionId: "s1" };
    a.documents.addChunks(lib, [{ index: 0, text: "before" }]);
    await b.deleteSession("ann", "s1");
    // A session's erase stops its attachment, not the library.
    expect(() => a.documents.addChunks(att, [{ index: 0, text: "after" }])).toThrow(
      /deleted while the document/,
    );
    a.documents.addChunks(lib, [{ index: 1, text: "still" }]);
    await b.deleteUser("ann");
    expect(() => a.documents.addChunks(lib, [{ index: 2, text: "late" }])).toThrow(/user's data was deleted/);
    expect(() => a.documents.commit(lib, { name: "n", format: "text", chunks: 3, bytes: 1 })).toThrow();
    const raw = new Database(join(dir.path, "local-ai.db"), { readonly: true });
    expect(raw.query("SELECT COUNT(*) AS n FROM memory WHERE user_id = 'ann'").get()).toEqual({ n: 0 });
    raw.close();
    a.close();
    b.close();
  });
});
