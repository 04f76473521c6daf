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
