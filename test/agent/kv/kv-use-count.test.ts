import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { saved, savedPairs } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// `status` asks what the saved states take, often. The count was dropped at each change of this
// core (a save, a removal) and made again at the next ask by a stat of every file in the folder,
// on the main loop: thousands of sessions held ping for as long. It is kept by the changes now.

test("status after saves and removals stats no file of the folder, and answers as a fresh count does", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 30, undefined, (i) => "abcd".repeat(i + 1));
  disk.usage();
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
  expect(use).toEqual(new KvDisk(dir.path, 1 << 30).usage());
  expect(use.files).toBe(29);
  await disk.zeroes.done();
});

// Two cores on one data_dir: kept by this core's changes alone, the count at a save missed the
// other core's states, so the budget let the folder grow past it (a review of the change above).
test("a save keeps the budget over another core's states too", async () => {
  using dir = tmpdir();
  const probe = new KvDisk(dir.path, 1 << 30);
  await saved(probe, "probe");
  const pair = probe.usage().bytes;
  probe.remove(probe.nameOf("u", "probe"));
  const budget = Math.floor(pair * 3.5);
  const one = new KvDisk(dir.path, budget);
  const two = new KvDisk(dir.path, budget);
  await saved(one, "a");
  one.usage();
  await saved(two, "b");
  await saved(two, "c");
  await saved(one, "d");
  expect(new KvDisk(dir.path, budget).usage().bytes).toBeLessThanOrEqual(budget);
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
