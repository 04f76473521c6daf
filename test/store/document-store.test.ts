import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { documentPageSql } from "../../src/store/document-pages.ts";
import type { PendingDocument } from "../../src/store/document-store.ts";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { commitNotedTurn as turn } from "../fixtures/noted-turn.ts";
import { readDb } from "../fixtures/read-db.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A document committed straight through the store: its chunks, then its row. */
function addDoc(
  store: Store,
  id: string,
  userId: string,
  sessionId: string,
  texts: string[],
  at = Date.now(),
): PendingDocument {
  const doc = { documentId: id, userId, sessionId, since: store.conversations.erasureMark(), at };
  store.documents.addChunks(
    doc,
    texts.map((text, index) => ({ index, text })),
  );
  expect(
    store.documents.commit(doc, { name: `${id}.md`, format: "markdown", chunks: texts.length, bytes: 10 }),
  ).toBe(true);
  return doc;
}

/** The ids of a user's documents (or a session's attachments) on the first page. */
const listed = (store: Store, user: string, sessionId?: string) =>
  store.documents.list(user, { sessionId, limit: 500 }).documents;

/** Every page of a listing: the ids page by page. */
function pages(store: Store, user: string, limit: number, budget?: number): string[][] {
  const seen: string[][] = [];
  for (let before: string | undefined; ; ) {
    const page = store.documents.list(user, { limit, before, budget });
    seen.push(page.documents.map((d) => d.document_id));
    if (page.next === null) return seen;
    before = page.next;
  }
}

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
    expect(listed(store, "ann")).toEqual([]);
    store.close();
  });

  test("chunks not yet committed are never recalled; discard removes them", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const doc = { documentId: "p", userId: "ann", sessionId: "", since: 0, at: Date.now() };
    store.documents.addChunks(doc, [{ index: 0, text: "pending GNU text" }]);
    expect(store.memory.search("ann", "gnu", 5)).toEqual([]);
    expect(listed(store, "ann")).toEqual([]);
    expect(store.documents.discard("p", 100)).toBe(1);
    // What the sweep looks at (store/orphan-sweep.ts): uncommitted documents and when they began.
    store.documents.addChunks(doc, [{ index: 0, text: "orphan" }]);
    addDoc(store, "c", "ann", "", ["committed"]);
    expect(store.documents.uncommitted("", 10)).toEqual({
      found: [{ documentId: "p", at: doc.at }],
      last: null,
    });
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
      listed(store, "ann")
        .map((d) => `${d.document_id}:${d.session_id}`)
        .sort(),
    ).toEqual(["att:s1", "gone:null", "lib:null"]);
    expect(listed(store, "ann", "s1").map((d) => d.document_id)).toEqual(["att"]);
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
    expect(listed(store, "ann").map((d) => d.document_id)).toEqual(["lib"]);
    expect(filesHolding(dir.path, "ATTACHWORD")).toEqual([]);
    expect(filesHolding(dir.path, "LIBRARYWORD").length).toBeGreaterThan(0);
    await store.deleteUser("ann");
    expect(listed(store, "ann")).toEqual([]);
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
    const raw = readDb(join(dir.path, "local-ai.db"));
    expect(raw.query("SELECT COUNT(*) AS n FROM memory WHERE user_id = 'ann'").get()).toEqual({ n: 0 });
    raw.close();
    a.close();
    b.close();
  });

  test("documents.list pages newest first; its cursor holds when documents are added or deleted between pages", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "ann", "s1", "hi");
    // Two share a time: the id orders them.
    for (const [id, at] of [
      ["a", 1],
      ["b", 2],
      ["c", 3],
      ["d", 3],
      ["e", 5],
    ] as const)
      addDoc(store, id, "ann", id === "c" ? "s1" : "", [`text of ${id}`], at * 1000);
    addDoc(store, "bobs", "bob", "", ["bob's"], 4000);
    expect(pages(store, "ann", 2)).toEqual([["e", "d"], ["c", "b"], ["a"]]);
    expect(pages(store, "ann", 5)).toEqual([["e", "d", "c", "b", "a"]]);
    // One added (newer, or older than the page shown) and one of the next page deleted between
    // pages: no document shown twice, none skipped but the one deleted.
    const page = (before?: string) => store.documents.list("ann", { limit: 2, before });
    const p1 = page();
    addDoc(store, "new", "ann", "", ["new"], 9000);
    addDoc(store, "old", "ann", "", ["old"], 500);
    expect(await store.deleteDocument("ann", "b")).toBe(true);
    const p2 = page(p1.next ?? "");
    const p3 = page(p2.next ?? "");
    expect([p1, p2, p3].map((p) => p.documents.map((d) => d.document_id))).toEqual([
      ["e", "d"],
      ["c", "a"],
      ["old"],
    ]);
    expect(p3.next).toBeNull();
    // A session's attachments page the same way.
    const s1 = store.documents.list("ann", { sessionId: "s1", limit: 1 });
    expect([s1.documents.map((d) => d.document_id), s1.next]).toEqual([["c"], null]);
    expect(() => store.documents.list("ann", { limit: 2, before: "not-a-cursor" })).toThrow(
      /params.before: not a cursor from documents.list's `next`/,
    );
    store.close();
  });

  test("a documents.list page stops at its byte budget, one document at least", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    for (let i = 0; i < 6; i++) addDoc(store, `d${i}`, "ann", "", [`text ${i}`], 1000 + i);
    const size = Buffer.byteLength(JSON.stringify(listed(store, "ann")[0])) + 1;
    expect(pages(store, "ann", 500, 2 * size)).toEqual([
      ["d5", "d4"],
      ["d3", "d2"],
      ["d1", "d0"],
    ]);
    expect(pages(store, "ann", 500, 1)).toEqual([["d5"], ["d4"], ["d3"], ["d2"], ["d1"], ["d0"]]);
    store.close();
  });

  test("a page of a library of 20,000 documents is read by index: no scan or sort of the whole library", () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    turn(store, "ann", "s1", "hi");
    // Rows straight into the table, in one transaction: the store's own adds take a transaction each.
    const raw = new Database(join(dir.path, "local-ai.db"));
    const insert = raw.query(
      `INSERT INTO documents (document_id, user_id, session_id, name, format, chunks, bytes, created_at)
       VALUES (?, 'ann', ?, ?, 'text', 1, 1, ?)`,
    );
    raw.transaction(() => {
      for (let i = 0; i < 20_000; i++)
        insert.run(
          `doc-${String(i).padStart(5, "0")}`,
          i % 10 === 0 ? "s1" : "",
          `name ${i}`,
          1000 + (i >> 1),
        );
    })();
    for (const sessionId of [undefined, "s1"]) {
      const plan = raw
        .query(`EXPLAIN QUERY PLAN ${documentPageSql(sessionId !== undefined)}`)
        .all({ $u: "ann", $s: "s1", $at: 5000, $id: "doc-09999", $n: 51 }) as { detail: string }[];
      const details = plan.map((r) => r.detail).join("; ");
      expect(details).toMatch(/SEARCH documents USING (COVERING )?INDEX/);
      expect(details).not.toMatch(/TEMP B-TREE|SCAN/);
    }
    raw.close();
    const first = store.documents.list("ann", { limit: 50 });
    expect(first.documents.map((d) => d.document_id).slice(0, 3)).toEqual([
      "doc-19999",
      "doc-19998",
      "doc-19997",
    ]);
    const all = pages(store, "ann", 500).flat();
    expect(all.length).toBe(20_000);
    expect(new Set(all).size).toBe(20_000);
    expect(listed(store, "ann", "s1").length).toBe(500);
    store.close();
  });
});
