import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { COUNT_PASS } from "../../../src/agent/kv/kv-use.ts";
import { countedUse, saved, savedPairs } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// `status` asks what the saved states take, often. The count was dropped at each change of this
// core (a save, a removal) and made again at the next ask by a stat of every file in the folder,
// on the main loop: thousands of sessions held ping for as long. It is kept by the changes now.

test("status after saves and removals stats no file of the folder, and answers as a fresh count does", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 30, undefined, (i) => "abcd".repeat(i + 1));
  await countedUse(disk);
  await saved(disk, "new");
  await saved(disk, "s3"); // over an older state of the session
  disk.removeSession("u", "s5");
  disk.remove(disk.nameOf("u", "s7"));
  disk.touch(disk.entry("u", "s9")!);
  const stat = spyOn(fs, "lstatSync");
  let use: ReturnType<KvDisk["usage"]>;
  try {
    use = disk.usage();
    expect(stat.mock.calls.length).toBe(0);
  } finally {
    stat.mockRestore();
  }
  expect(use).toEqual(await countedUse(new KvDisk(dir.path, 1 << 30)));
  expect(use?.files).toBe(29);
  await disk.zeroes.done();
});

// Two cores on one data_dir: kept by this core's changes alone, the count at a save missed the
// other core's states, so the budget let the folder grow past it (a review of the change above).
test("a save keeps the budget over another core's states too", async () => {
  using dir = tmpdir();
  const probe = new KvDisk(dir.path, 1 << 30);
  await saved(probe, "probe");
  const pair = (await countedUse(probe)).bytes;
  probe.remove(probe.nameOf("u", "probe"));
  const budget = Math.floor(pair * 3.5);
  const one = new KvDisk(dir.path, budget);
  const two = new KvDisk(dir.path, budget);
  await saved(one, "a");
  await countedUse(one);
  await saved(two, "b");
  await saved(two, "c");
  await saved(one, "d");
  expect((await countedUse(new KvDisk(dir.path, budget))).bytes).toBeLessThanOrEqual(budget);
  await Promise.all([one.zeroes.done(), two.zeroes.done(), probe.zeroes.done()]);
});

// Each save read every sidecar of the folder (up to 16 MiB each) on the main loop to order the
// evictions, even with the folder well within its budget, where none is evicted.
test("a save within the budget reads no other session's sidecar", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 30);
  const read = spyOn(fs, "readSync");
  try {
    await saved(disk, "new");
    expect(read.mock.calls.length).toBe(0);
  } finally {
    read.mockRestore();
  }
  await disk.zeroes.done();
});

// The first `status` before any save counted the whole folder in one go on the loop (a stat a
// file): a core started on a data_dir of thousands of saved states held ping for as long. It goes
// through the sliced count now; `status`'s `kv_disk` says null for the bytes and files meanwhile.
test("the first ask counts the folder a slice a turn, answering null until the count is done", async () => {
  using dir = tmpdir();
  const bins = savedPairs(new KvDisk(dir.path, 1 << 30), 200);
  const planted = new Set(bins.flatMap((b) => [b, b.replace(/\.bin$/, ".json")]));
  const disk = new KvDisk(dir.path, 1 << 30);
  COUNT_PASS.max = 32;
  const stat = spyOn(fs, "lstatSync");
  let first: ReturnType<KvDisk["usage"]>;
  let onTurn: number;
  try {
    first = disk.usage();
    onTurn = stat.mock.calls.filter(([p]) => planted.has(String(p))).length;
    expect(disk.usage()).toBeNull(); // one count under way, not a second
  } finally {
    stat.mockRestore();
    COUNT_PASS.max = 256;
  }
  expect(first).toBeNull();
  expect(onTurn).toBeLessThanOrEqual(32);
  const use = await countedUse(disk);
  expect(use.files).toBe(200);
  expect(disk.usage()).toEqual(use);
});
