import { afterEach, expect, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { listFolder } from "../../../src/agent/kv/kv-reads.ts";
import { COUNT_PASS, KvUseCount } from "../../../src/agent/kv/kv-use.ts";
import { savedPairs } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// The folder's count is sliced over turns of the loop (kv-use.ts): a `status` asked while a
// save's count ran (none done yet: a core just started on a folder of thousands) started a second
// whole count beside it, listed and stat'ed again, and a save while the first `status`'s count ran
// did the same. One count runs at a time now; an ask meanwhile waits for it.

afterEach(() => {
  COUNT_PASS.max = 256;
});

function plantedCount(n: number) {
  const dir = tmpdir();
  savedPairs(new KvDisk(dir.path, 1 << 30), n);
  const count = new KvUseCount(dir.path);
  const listed = { times: 0 };
  const listing = () => {
    listed.times++;
    return listFolder(dir.path);
  };
  return { dir, count, listed, listing };
}

test("status asked while a save's count runs lists the folder no second time", async () => {
  const { dir, count, listed, listing } = plantedCount(100);
  using _ = dir;
  COUNT_PASS.max = 16;
  const saving = count.recount(listing);
  expect(count.get(listing)).toBeNull();
  await saving;
  expect(count.get(listing)).toEqual({ bytes: expect.any(Number), files: 100 });
  expect(listed.times).toBe(1);
});

test("a save while the first status's count runs lists the folder no second time", async () => {
  const { dir, count, listed, listing } = plantedCount(100);
  using _ = dir;
  COUNT_PASS.max = 16;
  expect(count.get(listing)).toBeNull();
  await count.recount(listing);
  expect(count.now().files).toBe(100);
  expect(listed.times).toBe(1);
});
