import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { eraseImportedTail } from "../../../src/store/import-v01-erase.ts";
import { Store } from "../../../src/store/store.ts";
import { readDb } from "../../fixtures/read-db.ts";
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
  await editFrom(store, 0, "plan a trip to Lisbon", "Lisbon then");
  // The replaced conversation is recalled no more; the other session's entry stays.
  expect(store.memory.search("ann", "Porto", 5, "none").map((h) => h.doc.source)).toEqual(["session:other"]);
  expect(store.memory.search("ann", "Lisbon", 5, "none").map((h) => h.doc.source)).toEqual(["session:trip"]);
  store.close();
});

// The entry of a later turn is told by its text, which 0.1 wrote as the turn's input, a newline
// and its answer: an edit or a regenerate of that turn takes it, and the turns before keep theirs.
// SQL's length() stops at a NUL: an input holding one (a 0.1 file is JSON, "\u0000" and all) was
// never matched to its entry, which an edit left to be recalled.
test.each([
  ["my passport number is X123", "plain"],
  ["my passport number\u0000is X123", "holding a NUL"],
])(
  "an edit of a later turn of an imported session takes that turn's 0.1 memory, not the earlier turns' (%p, %s)",
  async (input) => {
    using dir = tmpdir();
    const store = await importedTrip(dir.path, input, "noted, X123");
    expect(store.memory.search("ann", "passport", 5, "none")).toHaveLength(1);
    await editFrom(store, 2, "what should I pack?", "light clothes");
    // The replaced turn is recalled no more; the turn before it still is.
    expect(store.memory.search("ann", "passport", 5, "none")).toEqual([]);
    expect(store.memory.search("ann", "Porto", 5, "none").map((h) => h.doc.source)).toEqual(["session:trip"]);
    expect(store.memory.search("ann", "pack", 5, "none").map((h) => h.doc.source)).toEqual(["session:trip"]);
    store.close();
  },
);

// The 0.1 files are kept aside after the import (imported-0.1/users/...): a delete erases the
// session's text there, and an edit erases the turns it replaces there too, history and memory
// file both, or a secret the user edited away stayed on disk in plain JSON.
test("an edit of an imported session erases the replaced turns from the 0.1 files kept aside", async () => {
  using dir = tmpdir();
  const store = await importedTrip(dir.path, "my passport number is X123", "noted, X123");
  await editFrom(store, 2, "what should I pack?", "light clothes");
  const kept = join(dir.path, "imported-0.1", "users", "ann");
  const history = JSON.parse(readFileSync(join(kept, "sessions", "trip", "history.json"), "utf8"));
  // The turns before the edit stay kept, as the import left them.
  expect(history.messages.map((m: { content: string }) => m.content)).toEqual([
    "plan a trip to Porto",
    "Porto it is",
  ]);
  const turns = JSON.parse(readFileSync(join(kept, "memory", "turns.json"), "utf8")).turns;
  expect(turns.map((t: { id: string }) => t.id)).toEqual(["x"]);
  expect(filesHolding(join(dir.path, "imported-0.1"), "X123")).toEqual([]);
  // Again (a core killed midway sends nothing again, but a second edit finds the files as the first left them).
  await editFrom(store, 2, "what else should I pack?", "a hat");
  expect(
    JSON.parse(readFileSync(join(kept, "sessions", "trip", "history.json"), "utf8")).messages,
  ).toHaveLength(2);
  store.close();
});

// An interrupted 0.1 turn's checkpoint is imported as the turn after the history: an edit from
// the first message replaces it too, and its input stayed in the kept checkpoint.json.
test("an edit from the first message of an imported session erases its kept 0.1 checkpoint too", async () => {
  using dir = tmpdir();
  const s = new SessionStore(dir.path, "ann", "trip");
  s.saveHistory([
    { role: "user", content: "plan a trip to Porto" },
    { role: "assistant", content: "Porto it is" },
  ]);
  const input = "my card is 4111 1111";
  s.saveCheckpoint(interrupted(input));
  const store = Store.open(dir.path);
  await store.whenImported();
  await editFrom(store, 0, "plan a trip to Lisbon", "Lisbon then");
  expect(filesHolding(join(dir.path, "imported-0.1"), "4111")).toEqual([]);
  expect(filesHolding(join(dir.path, "imported-0.1"), "Porto")).toEqual([]);
  store.close();
});

// An import that gave up (a full disk, say) leaves the sessions it had not reached in users/, to be
// imported by the next start: a 1.0 session of the same id, edited meanwhile, holds none of those
// 0.1 turns, and its edit cut the 0.1 history and memory entries that were never imported, lost.
test("an edit of a session whose 0.1 folder is not imported yet leaves that folder's files whole", async () => {
  using dir = tmpdir();
  const v01 = new SessionStore(dir.path, "ann", "trip");
  v01.saveHistory([
    { role: "user", content: "the 0.1 plan" },
    { role: "assistant", content: "kept for the next start" },
  ]);
  const entry = { id: "x", session_id: "trip", text: "the 0.1 plan\nkept", at: "2026-11-30T10:00:00.000Z" };
  MemoryIndex.forUser(dir.path, "ann").load().addTurn(entry);
  const store = await importGivingUpAt(dir.path, "ann/trip");
  // A 1.0 turn of the same session id, then its regenerate.
  await editFrom(store, undefined, "a new plan", "sure");
  await editFrom(store, 0, "another plan", "fine");
  store.close();
  const live = join(dir.path, "users", "ann");
  expect(JSON.parse(readFileSync(v01.historyPath, "utf8")).messages).toHaveLength(2);
  const turns = JSON.parse(readFileSync(join(live, "memory", "turns.json"), "utf8")).turns;
  expect(turns.map((t: { id: string }) => t.id)).toEqual(["x"]);
});

// The next start imports that folder after the session's 1.0 turns (seqs 2 and 3 here): an edit
// of its first 0.1 message (seq 2) cut the kept history at its own message 2, keeping the replaced
// 0.1 turn and its memory entry on disk, as if the history began at seq 0.
test("an edit of 0.1 turns imported after the session's 1.0 turns erases them from the kept files", async () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory([
    { role: "user", content: "my passport number is X123" },
    { role: "assistant", content: "noted" },
  ]);
  const entry = {
    id: "x",
    session_id: "trip",
    text: "my passport number is X123\nnoted",
    at: "2026-11-30T10:00:00.000Z",
  };
  MemoryIndex.forUser(dir.path, "ann").load().addTurn(entry);
  const store = await importedAfterA10Turn(dir.path);
  const seqs = store.conversations.history("ann", "trip").map((m) => m.content);
  expect(seqs).toEqual(["a new plan", "sure", "my passport number is X123", "noted"]);
  await editFrom(store, 2, "what should I pack?", "light clothes");
  expect(filesHolding(join(dir.path, "imported-0.1"), "X123")).toEqual([]);
  // The import's record of where the 0.1 turns begin names the session: its delete takes it.
  await store.deleteSession("ann", "trip");
  store.close();
  const db = readDb(join(dir.path, DB_FILE));
  expect(db.query("SELECT key FROM meta WHERE key LIKE '%trip%'").all()).toEqual([]);
  db.close();
});

// An interrupted 0.1 edit's checkpoint names the seq it replaces from in the 0.1 history's own
// numbering: imported after the session's 1.0 turns, its resume cut the history there, taking
// 1.0 turns and the 0.1 turns before the edited one with it.
test("an interrupted 0.1 edit imported after the session's 1.0 turns replaces from its own turn", async () => {
  using dir = tmpdir();
  const v01 = new SessionStore(dir.path, "ann", "trip");
  v01.saveHistory(tripTurns("and a hotel?", "Hotel A"));
  v01.saveCheckpoint({ ...interrupted("and a cheap hotel?"), replace_from_seq: 2 });
  const store = await importedAfterA10Turn(dir.path);
  const cp = JSON.parse(store.conversations.checkpoint("ann", "trip") ?? "{}");
  // "and a hotel?" is seq 4: the 1.0 turn's two messages, then the 0.1 history.
  expect(cp.replace_from_seq).toBe(4);
  expect(store.conversations.history("ann", "trip")[4]?.content).toBe("and a hotel?");
  store.close();
});

// Imported after the session's 1.0 turns, an edit of the first 0.1 message is at seq 2, not 0: the
// database tells the 0.1 entries it replaces by their text, and keeps the session's others. The
// kept files' erase took it for an edit from the first message and dropped every entry of the
// session, text the user never edited away (in users/, after an import that gave up before the
// memory file, never imported at all).
test("an edit of the first 0.1 message after the session's 1.0 turns keeps its other 0.1 memory entries", async () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory(tripTurns("and a hotel?", "Hotel A").slice(0, 2));
  const mem = MemoryIndex.forUser(dir.path, "ann").load();
  const at = "2026-11-30T10:00:00.000Z";
  mem.addTurn({ id: "x", session_id: "trip", text: "plan a trip to Porto\nPorto it is", at });
  // A turn 0.1 kept in memory only (its history cut since): no message names it.
  mem.addTurn({ id: "z", session_id: "trip", text: "pack a raincoat\nyes", at });
  const store = await importedAfterA10Turn(dir.path);
  await editFrom(store, 2, "what should I pack?", "light clothes");
  // The database drops the replaced turn's entry and keeps the other: the kept files as well.
  expect(store.memory.search("ann", "Porto", 5, "none")).toEqual([]);
  expect(store.memory.search("ann", "raincoat", 5, "none").map((h) => h.doc.source)).toEqual([
    "session:trip",
  ]);
  store.close();
  const kept = join(dir.path, "imported-0.1");
  expect(filesHolding(kept, "Porto it is")).toEqual([]);
  expect(filesHolding(kept, "raincoat")).toHaveLength(1);
});

// A 1.0 turn of that session interrupted meanwhile (the core killed mid-answer) is kept as its
// checkpoint, to be resumed: the import's commit of the 0.1 history dropped it, the user's
// question with it, and a 0.1 checkpoint beside the history took its place.
test("an import after the session's 1.0 turns keeps the checkpoint of an interrupted 1.0 turn", async () => {
  using dir = tmpdir();
  const v01 = new SessionStore(dir.path, "ann", "trip");
  v01.saveHistory(tripTurns("and a hotel?", "Hotel A"));
  v01.saveCheckpoint(interrupted("and a cheap hotel?"));
  const first = await importGivingUpAt(dir.path, "ann/trip");
  await editFrom(first, undefined, "a new plan", "sure");
  const at = new Date().toISOString();
  const body = JSON.stringify({ version: 1, ...interrupted("is Porto rainy in May?"), updated_at: at });
  first.conversations.saveCheckpoint("ann", "trip", body, new Date());
  first.close();
  const store = Store.open(dir.path);
  await store.whenImported();
  expect(store.conversations.history("ann", "trip")).toHaveLength(6);
  expect(JSON.parse(store.conversations.checkpoint("ann", "trip") ?? "{}").user_input).toBe(
    "is Porto rainy in May?",
  );
  store.close();
});

// The import commits the 0.1 history as a turn of agent "" (0.1 kept none): after the session's
// 1.0 turns, that overwrote the agent they ran, and sessions.list showed the session's as "".
test("an import after the session's 1.0 turns keeps the agent the session ran", async () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory(tripTurns("and a hotel?", "Hotel A"));
  const store = await importedAfterA10Turn(dir.path);
  expect(store.conversations.history("ann", "trip")).toHaveLength(6);
  expect(store.conversations.session("ann", "trip")?.agent).toBe("a");
  store.close();
});

// One it had reached is the session's turns: their files in users/ lose the replaced ones as the kept trees' do.
test("an edit of a session imported by an import that then gave up cuts its 0.1 history in users/", async () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory([
    { role: "user", content: "plan a trip to Porto" },
    { role: "assistant", content: "Porto it is" },
    { role: "user", content: "my passport number is X123" },
    { role: "assistant", content: "noted" },
  ]);
  const at = "2026-11-30T10:00:00.000Z";
  MemoryIndex.forUser(dir.path, "ann").load().addTurn({ id: "y", session_id: "other", text: "wine", at });
  const store = await importGivingUpAt(dir.path, "ann");
  await editFrom(store, 2, "what should I pack?", "light clothes");
  store.close();
  expect(filesHolding(join(dir.path, "users"), "X123")).toEqual([]);
});

// A 0.1 write killed midway left its temp file beside history.json (0.1 removed it at the session's
// next turn, which never came): a copy of the history, the replaced turns in it, which the import
// never read and the edit's erase left on disk.
test("an edit of an imported session erases a 0.1 write's stale temp file beside its history", async () => {
  using dir = tmpdir();
  const v01 = new SessionStore(dir.path, "ann", "trip");
  const messages = [
    { role: "user", content: "plan a trip to Porto" },
    { role: "assistant", content: "Porto it is" },
    { role: "user", content: "my passport number is X123" },
    { role: "assistant", content: "noted" },
  ] as const;
  v01.saveHistory([...messages]);
  writeFileSync(join(v01.dir, ".0123456789ab.tmp"), JSON.stringify({ version: 1, messages }), {
    mode: 0o600,
  });
  const store = Store.open(dir.path);
  await store.whenImported();
  await editFrom(store, 2, "what should I pack?", "light clothes");
  store.close();
  expect(filesHolding(join(dir.path, "imported-0.1"), "X123")).toEqual([]);
  expect(filesHolding(join(dir.path, "imported-0.1"), "Porto it is")).toHaveLength(1);
});

// A history.json the import could not read gave the session no messages, but its checkpoint was
// imported all the same: resumed, its input is the session's seq 0, and an edit of it left that
// input in the kept checkpoint.json (the erase gave up on the whole folder at the unread history).
test("an edit of the resumed 0.1 checkpoint of a session whose history was unreadable erases its kept checkpoint", async () => {
  using dir = tmpdir();
  const v01 = new SessionStore(dir.path, "ann", "trip");
  const input = "my card is 4111 1111";
  v01.saveCheckpoint(interrupted(input));
  writeFileSync(v01.historyPath, "{ torn", { mode: 0o600 });
  const store = Store.open(dir.path);
  await store.whenImported();
  // The resume, then an edit of it.
  await editFrom(store, undefined, input, "card noted");
  await editFrom(store, 0, "plan a trip to Lisbon", "Lisbon then");
  store.close();
  expect(filesHolding(join(dir.path, "imported-0.1"), "4111")).toEqual([]);
  // The unread history is kept as it was.
  expect(filesHolding(join(dir.path, "imported-0.1"), "{ torn")).toHaveLength(1);
});

// The memory files hold every session's entries (up to 256 MiB each, about a second per 100 MB),
// and the edit's commit waits on their erase: one past the 0.1 turns (a 1.0 answer regenerated
// after the imported history) replaces none of their entries, and read them all the same.
test("an edit past the 0.1 turns of an imported session reads none of the user's 0.1 memory files", () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory([
    { role: "user", content: "plan a trip to Porto" },
    { role: "assistant", content: "Porto it is" },
  ]);
  const at = "2026-11-30T10:00:00.000Z";
  MemoryIndex.forUser(dir.path, "ann")
    .load()
    .addTurn({ id: "x", session_id: "trip", text: "plan\nPorto", at });
  const read: string[] = [];
  // The database holds the history as imported.
  const held = (_m: unknown, upTo: number) => upTo;
  // users/ as an import that reached the session left it; seq 2 and 3: a 1.0 turn after the history.
  eraseImportedTail(dir.path, "ann", "trip", { seq: 2, base: 0, held }, true, (p) => read.push(p));
  expect(read).toEqual([join(dir.path, "users", "ann", "sessions", "trip", "history.json")]);
  // From the 0.1 turn's input, its entry is read and goes.
  eraseImportedTail(dir.path, "ann", "trip", { seq: 0, base: 0, held }, true, (p) => read.push(p));
  expect(read.filter((p) => p.endsWith("turns.json"))).toHaveLength(1);
});

/** A 0.1 checkpoint of a turn interrupted at its first step, its input `input`. */
function interrupted(input: string) {
  const turn = [{ role: "user" as const, content: input }];
  return { trace_id: "t", user_input: input, agent: "a", step: 0, parse_errors: 0, best_text: "", turn };
}

/** The files under `dir` whose bytes hold `needle`. */
function filesHolding(dir: string, needle: string): string[] {
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import("node:fs").Dirent[])
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name))
    .filter((p) => readFileSync(p).includes(needle));
}

/** A 0.1 history of two turns: the Porto trip, then `input` and `answer`. */
function tripTurns(input: string, answer: string) {
  return [
    { role: "user" as const, content: "plan a trip to Porto" },
    { role: "assistant" as const, content: "Porto it is" },
    { role: "user" as const, content: input },
    { role: "assistant" as const, content: answer },
  ];
}

/** ann's 0.1 session `trip` of two turns, the second `input` and `answer`, each with its memory entry, imported. */
async function importedTrip(dir: string, input: string, answer: string): Promise<Store> {
  new SessionStore(dir, "ann", "trip").saveHistory(tripTurns(input, answer));
  const mem = MemoryIndex.forUser(dir, "ann").load();
  const at = "2026-11-30T10:00:00.000Z";
  mem.addTurn({ id: "x", session_id: "trip", text: "plan a trip to Porto\nPorto it is", at });
  mem.addTurn({ id: "y", session_id: "trip", text: `${input}\n${answer}`, at });
  const store = Store.open(dir);
  await store.whenImported();
  return store;
}

/** The store opened on `dir`, its 0.1 import given up as it was about to begin `unit` (a full disk, say). */
async function importGivingUpAt(dir: string, unit: string): Promise<Store> {
  const store = Store.open(dir, {
    beforeImportUnit: async (u) => {
      if (u === unit) throw new Error("disk full");
    },
  });
  await store.whenImported();
  return store;
}

/** ann's 0.1 session `trip` imported by a second start, after the 1.0 turn a chat added while the first start's import had given up before it. */
async function importedAfterA10Turn(dir: string): Promise<Store> {
  const first = await importGivingUpAt(dir, "ann/trip");
  await editFrom(first, undefined, "a new plan", "sure");
  first.close();
  const store = Store.open(dir);
  await store.whenImported();
  return store;
}

/** ann's session `trip` edited from `seq` (undefined: a turn appended): the new turn committed as the core commits an edit. */
function editFrom(store: Store, seq: number | undefined, input: string, answer: string) {
  return store.writeOffLoop({
    kind: "commit",
    turn: {
      userId: "ann",
      sessionId: "trip",
      agent: "a",
      messages: [
        { role: "user", content: input },
        { role: "assistant", content: answer },
      ],
      ...(seq === undefined ? {} : { replaceFromSeq: seq }),
      memoryText: `${input}\n${answer}`,
      at: new Date(),
    },
  });
}

// A version before the `import_v01_seq:` record imported 0.1 turns after the session's 1.0 turns
// and wrote none: the edit's erase took the kept history to begin at seq 0, and an edit of the
// first 0.1 turn (seq 2) cut it at its own message 2, past its end, the replaced secret kept.
test("an edit of 0.1 turns an older version imported after 1.0 turns, with no record of where they begin, erases them", async () => {
  using dir = tmpdir();
  new SessionStore(dir.path, "ann", "trip").saveHistory([
    { role: "user", content: "my passport number is X123" },
    { role: "assistant", content: "noted" },
  ]);
  (await importedAfterA10Turn(dir.path)).close();
  const db = new Database(join(dir.path, DB_FILE));
  db.query("DELETE FROM meta WHERE key LIKE 'import_v01_seq:%'").run();
  db.close();
  const store = Store.open(dir.path);
  await store.whenImported();
  await editFrom(store, 2, "what should I pack?", "light clothes");
  store.close();
  expect(filesHolding(join(dir.path, "imported-0.1"), "X123")).toEqual([]);
});

// A version before the edit's erase of the kept files (or one whose erase was given up) left the
// replaced 0.1 turns in the kept history.json: a later edit, after them, cut it at its own seq
// and kept them, though the database holds other turns there since.
test("a later edit erases 0.1 turns an older version's edit replaced but left in the kept history", async () => {
  using dir = tmpdir();
  const store = await importedTrip(dir.path, "my passport number is X123", "noted, X123");
  // The older version's edit: the database's tail replaced, the kept files left as they were.
  store.conversations.commitTurn({
    userId: "ann",
    sessionId: "trip",
    agent: "a",
    messages: [
      { role: "user", content: "what should I pack?" },
      { role: "assistant", content: "light clothes" },
    ],
    replaceFromSeq: 2,
    at: new Date(),
  });
  expect(filesHolding(join(dir.path, "imported-0.1"), "X123")).toHaveLength(2);
  // An edit after that turn: the kept history's own seqs say nothing of it is replaced.
  await editFrom(store, 4, "and a hat?", "yes");
  store.close();
  expect(filesHolding(join(dir.path, "imported-0.1"), "X123")).toEqual([]);
  expect(filesHolding(join(dir.path, "imported-0.1"), "Porto it is")).toHaveLength(2);
});
