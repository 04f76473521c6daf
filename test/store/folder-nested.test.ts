import { expect, test } from "bun:test";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Store } from "../../src/store/store.ts";
import { filesHolding } from "../fixtures/files-holding.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

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
  // The outer folder alone first (its passages and record of the file), then both, inner last:
  // the record the inner folder writes is the file's only one, as before the fix.
  let store = Store.open(data, { folders: [outer], folderIndex: { watch: false } });
  await store.folderIndex.start();
  store.close();
  store = Store.open(data, { folders: [inner], folderIndex: { watch: false } });
  await store.folderIndex.start();
  store.close();
  store = Store.open(data, { folders: [outer, inner], folderIndex: { watch: false } });
  await store.folderIndex.start();
  expect(store.memory.search("u", "zebracorn", 5).map((h) => h.cite.id)).toEqual([join(inner, "plan.md")]);
  rmSync(join(inner, "plan.md"));
  await store.folderIndex.refresh();
  expect(store.memory.search("u", "zebracorn", 5)).toEqual([]);
  store.close();
  expect(filesHolding(data, "zebracorn")).toEqual([]);
});
