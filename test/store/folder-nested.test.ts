import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { readDb } from "../fixtures/read-db.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";
import { waitFor } from "../fixtures/wait.ts";

// A folder of memory.folders inside another one (docs/agent.md "Memory": "name its subfolders in
// memory.folders instead"): its files are indexed once, under the inner folder. Walked by both,
// a file kept one copy of its text per folder, and only the inner folder's record of it, so a
// file removed left the outer folder's passages in the database for good.

test("a file removed from a folder inside another leaves no passage and nothing readable on disk", async () => {
  using dir = tmpdir();
  const outer = join(dir.path, "notes");
  const inner = join(outer, "work");
  mkdirSync(inner, { recursive: true });
  writeFileSync(join(inner, "plan.md"), "zebracorn secret plan");
  writeFileSync(join(outer, "todo.md"), "quagga errands");
  const data = join(dir.path, "data");
  const store = Store.open(data, { folders: [outer, inner], folderIndex: { watch: false } });
  await store.folderIndex.start();
  // Found once, cited under the folder that holds it most closely.
  expect(store.memory.search("u", "zebracorn", 5).map((h) => h.cite.id)).toEqual([join(inner, "plan.md")]);
  expect(store.memory.search("u", "quagga", 5).map((h) => h.cite.id)).toEqual([join(outer, "todo.md")]);
  rmSync(join(inner, "plan.md"));
  await store.folderIndex.refresh();
  expect(store.memory.search("u", "zebracorn", 5)).toEqual([]);
  store.close();
  expect(filesHolding(data, "zebracorn")).toEqual([]);
});

test("passages an earlier version kept under the outer folder are forgotten at the next walk", async () => {
  using dir = tmpdir();
  const outer = join(dir.path, "notes");
  const inner = join(outer, "work");
  mkdirSync(inner, { recursive: true });
  writeFileSync(join(inner, "plan.md"), "zebracorn secret plan");
  const data = join(dir.path, "data");
  // Indexed as it is now (under the inner folder only), then what an earlier version's walk of
  // the outer folder added: its own copy of the passages, with no record of its own (the file's
  // one record, memory_files being keyed by path, is the inner folder's).
  let store = Store.open(data, { folders: [outer, inner], folderIndex: { watch: false } });
  await store.folderIndex.start();
  store.close();
  const db = new Database(join(data, "local-ai.db"));
  db.run(
    `INSERT INTO memory (user_id, session_id, seq, source, root, text, at)
     SELECT user_id, session_id, seq, 'file:work/plan.md', ?, text, at FROM memory WHERE user_id = '' AND root = ?`,
    [outer, inner],
  );
  expect(db.query("SELECT root FROM memory WHERE user_id = '' ORDER BY root").all()).toEqual([
    { root: outer },
    { root: inner },
  ]);
  db.close();
  store = Store.open(data, { folders: [outer, inner], folderIndex: { watch: false } });
  await store.folderIndex.start();
  expect(store.memory.search("u", "zebracorn", 5).map((h) => h.cite.id)).toEqual([join(inner, "plan.md")]);
  rmSync(join(inner, "plan.md"));
  await store.folderIndex.refresh();
  expect(store.memory.search("u", "zebracorn", 5)).toEqual([]);
  store.close();
  expect(filesHolding(data, "zebracorn")).toEqual([]);
});

test("a folder taken out of memory.folders is forgotten at the next start: no passage, nothing readable on disk", async () => {
  using dir = tmpdir();
  const kept = join(dir.path, "kept");
  const dropped = join(dir.path, "dropped");
  mkdirSync(kept);
  mkdirSync(dropped);
  writeFileSync(join(kept, "a.md"), "okapi field notes");
  writeFileSync(join(dropped, "b.md"), "narwhal private diary");
  const data = join(dir.path, "data");
  let store = Store.open(data, { folders: [kept, dropped], folderIndex: { watch: false } });
  await store.folderIndex.start();
  expect(store.memory.search("u", "narwhal", 5).map((h) => h.cite.id)).toEqual([join(dropped, "b.md")]);
  store.close();
  expect(filesHolding(data, "narwhal").length).toBeGreaterThan(0);
  const gone: string[] = [];
  store = Store.open(data, {
    folders: [kept],
    folderIndex: { watch: false, onGone: (s) => gone.push(...s) },
  });
  await store.folderIndex.start();
  expect(store.memory.search("u", "narwhal", 5)).toEqual([]);
  expect(store.memory.search("u", "okapi", 5).map((h) => h.cite.id)).toEqual([join(kept, "a.md")]);
  // What quoted it (a saved KV state) is told to go too.
  expect(gone).toEqual(["file:b.md"]);
  store.close();
  expect(filesHolding(data, "narwhal")).toEqual([]);
  expect(filesHolding(data, "okapi").length).toBeGreaterThan(0);
});

// The words' purge after a folder's passages are dropped can fail (a SQLite without FTS5's
// secure-delete merges the index, here made to fail): what quotes the file is told to go all the same.
test("a failed purge after a folder is forgotten still tells what quoted its files to go", async () => {
  using dir = tmpdir();
  const dropped = join(dir.path, "dropped");
  mkdirSync(dropped);
  writeFileSync(join(dropped, "b.md"), "narwhal private diary");
  const data = join(dir.path, "data");
  let store = Store.open(data, { folders: [dropped], folderIndex: { watch: false } });
  await store.folderIndex.start();
  store.close();
  const db = new Database(join(data, "local-ai.db"));
  db.run("INSERT OR REPLACE INTO meta (key, value) VALUES ('fts_optimize_after_delete', '1')");
  db.run("DROP TABLE messages_fts");
  db.close();
  const gone: string[] = [];
  store = Store.open(data, { folders: [], folderIndex: { watch: false, onGone: (s) => gone.push(...s) } });
  await store.folderIndex.start();
  expect(store.memory.search("u", "narwhal", 5)).toEqual([]);
  expect(gone).toEqual(["file:b.md"]);
  store.close();
});

test("a lock held while an unlisted folder is forgotten fails neither the index nor recall: tried again", async () => {
  using dir = tmpdir();
  const kept = join(dir.path, "kept");
  const dropped = join(dir.path, "dropped");
  mkdirSync(kept);
  mkdirSync(dropped);
  writeFileSync(join(kept, "a.md"), "okapi field notes");
  writeFileSync(join(dropped, "b.md"), "narwhal private diary");
  const data = join(dir.path, "data");
  let store = Store.open(data, { folders: [dropped], folderIndex: { watch: false } });
  await store.folderIndex.start();
  store.close();
  // Another process (a second core, a sqlite3 shell) writing as this one starts.
  const other = new Database(join(data, "local-ai.db"));
  other.run("BEGIN IMMEDIATE");
  // Held past the store's wait for a lock (shortened here).
  store = Store.open(data, { folders: [kept], busyWaitMs: 100, folderIndex: { watch: false, retryMs: 50 } });
  // It failed start() for good: the listed folder never walked, every recall's wait refused.
  await store.folderIndex.start();
  other.run("COMMIT");
  other.close();
  await store.folderIndex.whenIndexed(1000);
  await store.folderIndex.refresh();
  expect(store.memory.search("u", "okapi", 5).map((h) => h.cite.id)).toEqual([join(kept, "a.md")]);
  // The forgetting tried again once the lock is gone (recall never reads an unlisted folder: its rows are counted).
  const look = readDb(join(data, "local-ai.db"));
  const rows = () =>
    (look.query("SELECT COUNT(*) AS n FROM memory WHERE root = ?").get(dropped) as { n: number }).n;
  expect(await waitFor(() => rows() === 0, { intervalMs: 20 })).toBe(true);
  look.close();
  store.close();
  expect(filesHolding(data, "narwhal")).toEqual([]);
});
