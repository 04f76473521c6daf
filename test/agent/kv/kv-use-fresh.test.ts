import { afterEach, expect, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { COUNT_PASS } from "../../../src/agent/kv/kv-use.ts";
import { countedUse, saved, savedPair, savedPairs } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// One count of the KV folder runs at a time (kv-use.ts). A save's budget pass joined a count that
// began before its own file landed: another core's state renamed into place in between (its own
// budget pass counted before this save's file was there) was in neither count, and the folder
// stayed over `llama.kv_disk_bytes` until the next save. A save's pass counts a listing taken
// after its file landed (docs/agent.md, "The disk budget").

afterEach(() => {
  COUNT_PASS.max = 256;
});

test("a save while the first status's count runs keeps the budget over a state landed since that count began", async () => {
  using dir = tmpdir();
  savedPairs(new KvDisk(dir.path, 1 << 30), 100);
  // The other core's state, large: with it the folder fits, with the new one too it does not.
  const big = "y".repeat(20_000);
  using probe = tmpdir();
  savedPair(new KvDisk(probe.path, 1 << 30), "big", [], big);
  const bigPair = (await countedUse(new KvDisk(probe.path, 1 << 30))).bytes;
  const budget = (await countedUse(new KvDisk(dir.path, 1 << 30))).bytes + bigPair + 50;
  const other = new KvDisk(dir.path, 1 << 30);
  const disk = new KvDisk(dir.path, budget);
  COUNT_PASS.max = 1;
  // The first status: its count lists the folder now, a file a turn.
  expect(disk.usage()).toBeNull();
  savedPair(other, "big", [], big);
  await saved(disk, "new");
  COUNT_PASS.max = 256;
  expect((await countedUse(new KvDisk(dir.path, 1 << 30))).bytes).toBeLessThanOrEqual(budget);
  expect(disk.usage()).toEqual(await countedUse(new KvDisk(dir.path, 1 << 30)));
  await Promise.all([disk.zeroes.done(), other.zeroes.done()]);
});
