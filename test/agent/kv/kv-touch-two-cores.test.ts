import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { savedPair } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Two cores on one data_dir. A restore's touch in one read the sidecar before the other's erase and
// renamed it back after: the notes' text stayed on disk with no state beside it, which no later
// erase found unless it matched by sources again (a review found it; docs/agent.md "The disk budget").
test("another core's erase between a touch's read and its rename leaves no sidecar put back", async () => {
  using dir = tmpdir();
  const eraser = new KvDisk(dir.path, 1 << 30);
  // `now` is asked after the touch's read of the sidecar and before its rename.
  const toucher = new KvDisk(dir.path, 1 << 30, () => {
    eraser.removeSession("u", "s");
    return Date.now();
  });
  savedPair(toucher, "s", ["document:d"]);
  const name = toucher.nameOf("u", "s");
  const entry = toucher.entry("u", "s");
  expect(entry).toBeDefined();
  toucher.touch(entry!);
  expect(existsSync(join(dir.path, `${name}.bin`))).toBe(false);
  expect(existsSync(join(dir.path, `${name}.json`))).toBe(false);
  await Promise.all([eraser.zeroes.done(), toucher.zeroes.done()]);
});

test("a touch with the state still there keeps the sidecar, marked used", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30, () => 12345);
  savedPair(disk, "s");
  disk.touch(disk.entry("u", "s")!);
  expect(disk.entry("u", "s")?.used_at).toBe(12345);
  await disk.zeroes.done();
});
