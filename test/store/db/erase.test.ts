import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  writeFileSync,
  writeSync,
} from "node:fs";
import { join } from "node:path";
import { SCRUB_RETRY_MS } from "../../../src/store/erase.ts";
import { ERASURE_KEEP_MS } from "../../../src/store/erasures.ts";
import { Store } from "../../../src/store/store.ts";
import { filesHolding } from "../../fixtures/files-holding.ts";
import { readDb } from "../../fixtures/read-db.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";
import { waitFor } from "../../fixtures/wait.ts";

function chat(store: Store, u: string, s: string, text: string) {
  store.conversations.commitTurn({
    userId: u,
    sessionId: s,
    agent: "a",
    messages: [
      { role: "user", content: text },
      { role: "assistant", content: `about ${text}`, reasoning: `thinking of ${text}` },
    ],
    memoryText: `${text}\nabout ${text}`,
    at: new Date(),
  });
}

/** A 0.1 data folder with one session of `user` holding `marker`, and its memory. */
function writeV01(dataDir: string, user: string, session: string, marker: string) {
  const sdir = join(dataDir, "users", user, "sessions", session);
  mkdirSync(sdir, { recursive: true });
  writeFileSync(
    join(sdir, "history.json"),
    JSON.stringify({
      version: 1,
      messages: [
        { role: "user", content: `old ${marker}` },
        { role: "assistant", content: "ok" },
      ],
    }),
  );
  const mdir = join(dataDir, "users", user, "memory");
  mkdirSync(mdir, { recursive: true });
  writeFileSync(
    join(mdir, "turns.json"),
    JSON.stringify({
      version: 1,
      turns: [
        { id: "t1", session_id: session, text: `old ${marker}`, at: "2026-01-01T00:00:00Z" },
        { id: "t2", session_id: "keep", text: "unrelated", at: "2026-01-01T00:00:00Z" },
      ],
    }),
  );
}

describe("erasing for good", () => {
  test("users.delete leaves no byte of the user's text in any file under data_dir", async () => {
    using dir = tmpdir();
    writeV01(dir.path, "alice", "old", "ZEBRAFISH");
    const store = Store.open(dir.path);
    // The import writes on the store's thread; these direct writes skip Store.write's wait for its lock.
    await store.whenImported();
    // Enough turns that the text spreads over many pages, the index and the log.
    for (let i = 0; i < 200; i++)
      chat(store, "alice", `s${i % 7}`, `ZEBRAFISH note ${i} ${"filler ".repeat(i % 30)}`);
    chat(store, "bob", "b", "bob keeps PELICAN");
    // An image of hers whose bytes spell the marker (docs/protocol.md#images), over several parts.
    const image = Buffer.alloc(2_500_000, "ZEBRAFISH-PIXELS ");
    const [ref] = await store.conversations.attachments.stage(
      "alice",
      "s0",
      [{ mime: "image/png", data: image }],
      new Date(),
    );
    store.conversations.commitTurn({
      userId: "alice",
      sessionId: "s0",
      agent: "a",
      messages: [{ role: "user", content: "look", attachments: [ref!] }],
      at: new Date(),
    });
    expect(filesHolding(dir.path, "ZEBRAFISH-PIXELS").length).toBeGreaterThan(0);
    expect(filesHolding(dir.path, "ZEBRAFISH").length).toBeGreaterThan(1);
    expect((await store.deleteUser("alice")).deleted_sessions).toBe(8);
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
    expect(store.list("alice", 10).sessions).toEqual([]);
    expect(store.memory.search("alice", "ZEBRAFISH", 5)).toEqual([]);
    expect(await store.search("bob", "PELICAN", 5)).toHaveLength(2); // the question and the answer
    store.close();
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
  });

  test("users.delete leaves no byte of the user's memory vectors either", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    // Vectors whose bytes spell a marker, so a copy left in any file is found by the same grep.
    const marked = new Float32Array(new TextEncoder().encode("VECTORMARKWOMBAT".repeat(16)).buffer);
    for (let i = 0; i < 100; i++) chat(store, "alice", `s${i % 5}`, `note ${i}`);
    chat(store, "bob", "b", "bob's note");
    const ids = (store.memory.search("alice", "note", 200) as { doc: { id: string } }[]).map((h) =>
      Number(h.doc.id),
    );
    store.memory.vectors.put(
      "m1",
      ids.map((id) => ({ id, vector: marked })),
    );
    expect(store.memory.vectors.counts("m1").embedded).toBe(100);
    expect(filesHolding(dir.path, "VECTORMARKWOMBAT").length).toBeGreaterThan(0);
    await store.deleteUser("alice");
    expect(store.memory.vectors.counts("m1").embedded).toBe(0);
    expect(store.memory.search("alice", "x", 5, "", { fingerprint: "m1", vector: marked })).toEqual([]);
    expect(filesHolding(dir.path, "VECTORMARKWOMBAT")).toEqual([]);
    store.close();
    expect(filesHolding(dir.path, "VECTORMARKWOMBAT")).toEqual([]);
  });

  for (const how of ["documents.delete", "sessions.delete", "users.delete"] as const)
    test(`${how} leaves no byte of a document's text, name or chunks' vectors`, async () => {
      using dir = tmpdir();
      const store = Store.open(dir.path);
      chat(store, "alice", "s", "hello");
      const attached = how === "sessions.delete";
      const add = (user: string, id: string, marker: string) => {
        const doc = {
          documentId: id,
          userId: user,
          sessionId: attached ? "s" : "",
          since: 0,
          at: Date.now(),
        };
        const chunks = Array.from({ length: 200 }, (_, i) => ({
          index: i,
          text: `${marker} chunk ${i} ${"filler ".repeat(i % 30)}`,
        }));
        for (let i = 0; i < chunks.length; i += 50) store.documents.addChunks(doc, chunks.slice(i, i + 50));
        store.documents.commit(doc, { name: `${marker}-name.md`, format: "markdown", chunks: 200, bytes: 1 });
        return store.documents.chunkIds(user, id);
      };
      const vector = new Float32Array(new TextEncoder().encode("DOCVECTORMARK".repeat(20)).buffer);
      const ids = add("alice", "doc-1", "DOCTEXTMARK");
      store.memory.vectors.put(
        "m1",
        ids.map((id) => ({ id, vector })),
      );
      add("bob", "doc-2", "BOBKEEPS");
      expect(filesHolding(dir.path, "DOCTEXTMARK").length).toBeGreaterThan(0);
      expect(filesHolding(dir.path, "DOCVECTORMARK").length).toBeGreaterThan(0);
      if (how === "documents.delete") expect(await store.deleteDocument("alice", "doc-1")).toBe(true);
      else if (attached) expect((await store.deleteSession("alice", "s")).deleted).toBe(true);
      else await store.deleteUser("alice");
      expect(filesHolding(dir.path, "DOCTEXTMARK")).toEqual([]);
      expect(filesHolding(dir.path, "DOCVECTORMARK")).toEqual([]);
      store.close();
      expect(filesHolding(dir.path, "DOCTEXTMARK")).toEqual([]);
      expect(filesHolding(dir.path, "DOCVECTORMARK")).toEqual([]);
      expect(filesHolding(dir.path, "BOBKEEPS").length).toBeGreaterThan(0);
    });

  test("sessions.delete erases that session only: its messages, reasoning, memory and 0.1 files", async () => {
    using dir = tmpdir();
    writeV01(dir.path, "alice", "old", "QUOKKA");
    const store = Store.open(dir.path);
    await store.whenImported();
    for (let i = 0; i < 50; i++) chat(store, "alice", "gone", `QUOKKA ${i}`);
    chat(store, "alice", "kept", "OCELOT stays");
    expect((await store.deleteSession("alice", "gone")).deleted).toBe(true);
    expect((await store.deleteSession("alice", "old")).deleted).toBe(true);
    expect((await store.deleteSession("alice", "never")).deleted).toBe(false);
    expect(filesHolding(dir.path, "QUOKKA")).toEqual([]);
    expect(await store.search("alice", "OCELOT", 5)).toHaveLength(2);
    // the kept-aside memory file keeps the other session's entry
    const aside = JSON.parse(
      readFileSync(join(dir.path, "imported-0.1", "users", "alice", "memory", "turns.json"), "utf8"),
    );
    expect(aside.turns.map((t: { id: string }) => t.id)).toEqual(["t2"]);
    if (process.platform !== "win32")
      expect(
        statSync(join(dir.path, "imported-0.1", "users", "alice", "memory", "turns.json")).mode & 0o777,
      ).toBe(0o600);
    store.close();
  });
});

/** What `work` threw (undefined when it did not). */
function thrown(work: () => unknown): unknown {
  try {
    work();
  } catch (err) {
    return err;
  }
  return undefined;
}

/** A turn of `u` in `s` begun at erase mark `since`. */
const turn = (u: string, s: string, since: number) => ({
  userId: u,
  sessionId: s,
  agent: "a",
  messages: [{ role: "user" as const, content: "late SECRET" }],
  at: new Date(),
  since,
});

describe("a delete wins over a turn begun before it", () => {
  test("a turn's writes are refused after its session or user was erased; a turn begun after is not", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    chat(store, "ann", "s", "first");
    chat(store, "ann", "t", "other");
    const mark = store.conversations.erasureMark();
    await store.deleteSession("ann", "s");
    const refused = { code: "cancelled", data: { reason: "session_deleted" } };
    expect(thrown(() => store.conversations.commitTurn(turn("ann", "s", mark)))).toMatchObject(refused);
    expect(
      thrown(() => store.conversations.saveCheckpoint("ann", "s", "{}", new Date(), { since: mark })),
    ).toMatchObject(refused);
    // Another session, another user, and a turn that began after the delete all commit.
    store.conversations.commitTurn(turn("ann", "t", mark));
    store.conversations.commitTurn(turn("bob", "s", mark));
    store.conversations.commitTurn(turn("ann", "s", store.conversations.erasureMark()));
    const later = store.conversations.erasureMark();
    await store.deleteUser("ann");
    expect(thrown(() => store.conversations.commitTurn(turn("ann", "t", later)))).toMatchObject(refused);
    expect(store.list("ann", 10).sessions).toEqual([]);
    expect(store.list("bob", 10).sessions).toHaveLength(1);
    store.close();
  });

  test("erase rows are pruned after a day; a turn older than the pruned rows is refused", async () => {
    using dir = tmpdir();
    let now = Date.parse("2026-01-01T00:00:00Z");
    const store = Store.open(dir.path, { now: () => new Date(now) });
    const ancient = store.conversations.erasureMark();
    await store.deleteSession("ann", "x");
    now += ERASURE_KEEP_MS + 1;
    const recent = store.conversations.erasureMark();
    await store.deleteSession("ann", "y");
    const db = readDb(join(dir.path, "local-ai.db"));
    expect(db.query("SELECT COUNT(*) AS n FROM erasures").get()).toEqual({ n: 1 });
    db.close();
    expect(thrown(() => store.conversations.commitTurn(turn("ann", "z", ancient)))).toMatchObject({
      code: "cancelled",
    });
    store.conversations.commitTurn(turn("ann", "z", recent));
    store.close();
  });
});

describe("what an erase keeps of the ids", () => {
  // A user id may be an email address (its alphabet allows one); the erase's own record must not
  // keep it readable for a day after users.delete (store/erasures.ts).
  test("users.delete and sessions.delete leave the user's and the session's ids in no file", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const user = "ann.UIDMARK@example.com";
    chat(store, user, "SIDMARK-one", "hello");
    chat(store, user, "kept", "hello");
    chat(store, "bob", "b", "hi");
    const mark = store.conversations.erasureMark();
    await store.deleteSession(user, "SIDMARK-one");
    expect(filesHolding(dir.path, "SIDMARK")).toEqual([]);
    await store.deleteUser(user);
    expect(filesHolding(dir.path, "UIDMARK")).toEqual([]);
    // Still recorded: a turn of either begun before is refused, bob's is not.
    const refused = { code: "cancelled", data: { reason: "session_deleted" } };
    expect(thrown(() => store.conversations.commitTurn(turn(user, "SIDMARK-one", mark)))).toMatchObject(
      refused,
    );
    expect(thrown(() => store.conversations.commitTurn(turn(user, "other", mark)))).toMatchObject(refused);
    store.conversations.commitTurn(turn("bob", "b", mark));
    store.close();
    expect(filesHolding(dir.path, "UIDMARK")).toEqual([]);
  });

  test("rows an earlier version wrote with the ids as given are pruned at open, their turns refused", async () => {
    using dir = tmpdir();
    Store.open(dir.path).close();
    const db = new Database(join(dir.path, "local-ai.db"));
    db.run("PRAGMA secure_delete = ON");
    db.run("INSERT INTO erasures (user_id, session_id, at) VALUES ('OLDUIDMARK@example.com', '', 1)");
    db.run("DELETE FROM meta WHERE key = 'erasure_key'");
    // What migration 7 added goes too: the file as migration 5 left it.
    db.run("ALTER TABLE messages DROP COLUMN by_core");
    db.run("PRAGMA user_version = 5");
    db.close();
    expect(filesHolding(dir.path, "OLDUIDMARK").length).toBeGreaterThan(0);
    const store = Store.open(dir.path);
    expect(filesHolding(dir.path, "OLDUIDMARK")).toEqual([]);
    expect(
      thrown(() => store.conversations.commitTurn(turn("OLDUIDMARK@example.com", "s", 0))),
    ).toMatchObject({
      code: "cancelled",
    });
    store.conversations.commitTurn(turn("OLDUIDMARK@example.com", "s", store.conversations.erasureMark()));
    store.close();
  });

  test("an earlier version's core on the same folder: its record is seen, then pruned at the next erase", async () => {
    using dir = tmpdir();
    const store = Store.open(dir.path);
    const mark = store.conversations.erasureMark();
    // What a core before migration 6, running beside this one, records for its sessions.delete.
    const other = new Database(join(dir.path, "local-ai.db"));
    other.run("PRAGMA secure_delete = ON");
    other.run("INSERT INTO erasures (user_id, session_id, at) VALUES ('PLAINMARK@example.com', 'gone', ?)", [
      Date.now(),
    ]);
    other.close();
    const refused = { code: "cancelled", data: { reason: "session_deleted" } };
    expect(
      thrown(() => store.conversations.commitTurn(turn("PLAINMARK@example.com", "gone", mark))),
    ).toMatchObject(refused);
    store.conversations.commitTurn(turn("PLAINMARK@example.com", "kept", mark));
    // This core's own erase (kept as a keyed hash) prunes the plain record.
    await store.deleteSession("PLAINMARK@example.com", "kept");
    store.close();
    expect(filesHolding(dir.path, "PLAINMARK")).toEqual([]);
    // Pruned, a turn of "gone" begun before it is still refused.
    const again = Store.open(dir.path);
    expect(
      thrown(() => again.conversations.commitTurn(turn("PLAINMARK@example.com", "gone", mark))),
    ).toMatchObject(refused);
    again.close();
  });
});

describe("erasing reaches the databases set aside", () => {
  /** A data folder whose database, holding alice's ZEBRAFISH and bob's PELICAN, was set aside as `name`. */
  function setAside(dir: string, damage: boolean): void {
    const store = Store.open(dir);
    for (let i = 0; i < 120; i++)
      chat(store, "alice", `s${i % 5}`, `ZEBRAFISH ${i} ${"filler ".repeat(i % 40)}`);
    chat(store, "bob", "b", "bob keeps PELICAN");
    store.close();
    const path = join(dir, "local-ai.db");
    if (damage) {
      // A page in the middle of the file overwritten: quick_check fails and the next open sets it aside.
      const fd = openSync(path, "r+");
      writeSync(fd, Buffer.alloc(4096, 0xa5), 0, 4096, 4096 * 8);
      closeSync(fd);
    } else renameSync(path, `${path}.corrupt-2026-01-01T00-00-00-000Z`);
  }

  test("a copy that can be read is scrubbed of the user, others' rows kept", async () => {
    using dir = tmpdir();
    setAside(dir.path, false);
    const store = Store.open(dir.path);
    const r = await store.deleteUser("alice");
    expect(r).toEqual({
      deleted_sessions: 0,
      copies: [
        {
          path: join(dir.path, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z"),
          outcome: "scrubbed",
          deleted_sessions: 5,
        },
      ],
    });
    store.close();
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
    const copy = new Database(join(dir.path, "local-ai.db.corrupt-2026-01-01T00-00-00-000Z"), {
      readonly: true,
    });
    expect(copy.query("SELECT content FROM messages WHERE user_id = 'bob' ORDER BY seq").all()).toEqual([
      { content: "bob keeps PELICAN" },
      { content: "about bob keeps PELICAN" },
    ]);
    copy.close();
  });

  test("a copy an earlier version set aside keeps no erased id as given", async () => {
    using dir = tmpdir();
    const user = "ann.UIDMARK@example.com";
    Store.open(dir.path).close();
    const path = join(dir.path, "local-ai.db");
    // Its record as an earlier version wrote it (before migration 6): the ids as the host gave them.
    const db = new Database(path);
    db.run("INSERT INTO erasures (user_id, session_id, at) VALUES (?, 'SIDMARK', 1)", [user]);
    db.close();
    renameSync(path, `${path}.corrupt-2026-01-01T00-00-00-000Z`);
    const store = Store.open(dir.path);
    await store.deleteSession(user, "SIDMARK");
    await store.deleteUser(user);
    store.close();
    expect(filesHolding(dir.path, "UIDMARK")).toEqual([]);
    expect(filesHolding(dir.path, "SIDMARK")).toEqual([]);
  });

  // After a reset a document lives on only in the copy set aside: documents.delete answered
  // document_not_found and left its text there for good, where sessions.delete erases a session
  // the live database lacks wherever else it is.
  test("a document the live database does not hold is erased from the copy set aside still", async () => {
    using dir = tmpdir();
    const first = Store.open(dir.path);
    const doc = { documentId: "doc-1", userId: "alice", sessionId: "", since: 0, at: Date.now() };
    first.documents.addChunks(doc, [{ index: 0, text: "the AARDVARKDOC burrows" }]);
    first.documents.commit(doc, { name: "AARDVARKNAME.md", format: "markdown", chunks: 1, bytes: 1 });
    chat(first, "bob", "b", "bob keeps PELICAN");
    first.close();
    const path = join(dir.path, "local-ai.db");
    renameSync(path, `${path}.corrupt-2026-01-01T00-00-00-000Z`);
    const store = Store.open(dir.path);
    expect(filesHolding(dir.path, "AARDVARK").length).toBeGreaterThan(0);
    expect(await store.deleteDocument("alice", "doc-1")).toBe(false);
    store.close();
    expect(filesHolding(dir.path, "AARDVARK")).toEqual([]);
    expect(filesHolding(dir.path, "PELICAN").length).toBeGreaterThan(0);
  });

  test("a damaged copy, which cannot be scrubbed, is removed whole and said so", async () => {
    using dir = tmpdir();
    setAside(dir.path, true);
    const store = Store.open(dir.path);
    const aside = store.takeResets().at(-1)?.aside as string;
    expect(filesHolding(dir.path, "ZEBRAFISH")).toContain(aside.slice(dir.path.length + 1));
    const r = await store.deleteSession("alice", "s1");
    expect(r.copies).toEqual([{ path: aside, outcome: "removed", problem: expect.stringContaining("") }]);
    expect(existsSync(aside)).toBe(false);
    expect(filesHolding(dir.path, "ZEBRAFISH")).toEqual([]);
    expect((await store.deleteUser("alice")).copies).toEqual([]);
    store.close();
  });
});

/** A session to delete, and another process's long read (another core's export, a sqlite3 shell) holding its snapshot. */
function readerInTheWay(dataDir: string): { store: Store; reader: Database } {
  const store = Store.open(dataDir);
  for (let i = 0; i < 40; i++) chat(store, "alice", "gone", `MARMOSET ${i}`);
  const reader = new Database(join(dataDir, "local-ai.db"));
  reader.run("BEGIN");
  reader.query("SELECT count(*) FROM messages").get();
  return { store, reader };
}

describe("the log scrubbed when a reader stood in the way (docs/protocol.md#conversations-sessions-and-usersdelete)", () => {
  test("a reader holding a snapshot during the delete: the log is emptied once it lets go, with no call", async () => {
    using dir = tmpdir();
    const { store, reader } = readerInTheWay(dir.path);
    expect((await store.deleteSession("alice", "gone")).deleted).toBe(true);
    expect(filesHolding(dir.path, "MARMOSET")).toEqual(["local-ai.db-wal"]);
    reader.run("COMMIT");
    expect(
      await waitFor(() => filesHolding(dir.path, "MARMOSET").length === 0, { timeoutMs: SCRUB_RETRY_MS * 6 }),
    ).toBe(true);
    reader.close(false);
    store.close();
  });

  test("a core that died owing the scrub: the next open empties the log", async () => {
    using dir = tmpdir();
    const { store, reader } = readerInTheWay(dir.path);
    await store.deleteSession("alice", "gone");
    // The core and the reader die now: the files are as they are left (copied as they lie).
    using copy = tmpdir();
    for (const f of ["local-ai.db", "local-ai.db-wal"])
      writeFileSync(join(copy.path, f), readFileSync(join(dir.path, f)));
    reader.close(false);
    store.close();
    expect(filesHolding(copy.path, "MARMOSET")).toEqual(["local-ai.db-wal"]);
    const next = Store.open(copy.path);
    expect(filesHolding(copy.path, "MARMOSET")).toEqual([]);
    expect(next.list("alice", 10).sessions).toEqual([]);
    next.close();
  });
});
