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

// The save's budget pass needs a listing taken after its file landed (kv-use-fresh.test.ts): it
// waits for that count, then lists once more, one count at a time; saves meanwhile share it.
test("saves while the first status's count runs wait for it, then share one count listed after", async () => {
  const { dir, count, listed, listing } = plantedCount(100);
  using _ = dir;
  COUNT_PASS.max = 16;
  const doneAtListing: number[] = [];
  const watched = () => {
    doneAtListing.push(count.now().files);
    return listing();
  };
  expect(count.get(watched)).toBeNull();
  await Promise.all([count.recount(watched), count.recount(watched), count.recount(watched)]);
  expect(count.now().files).toBe(100);
  expect(listed.times).toBe(2);
  // The second listing taken once the first count was done, not beside it.
  expect(doneAtListing).toEqual([0, 100]);
});

test("a count that fails fails each ask waiting for it, and the next ask counts again", async () => {
  const { dir, count, listing } = plantedCount(40);
  using _ = dir;
  COUNT_PASS.max = 16;
  let calls = 0;
  const failing = () => {
    calls++;
    if (calls === 2) throw new Error("unreadable");
    return listing();
  };
  expect(count.get(failing)).toBeNull();
  const asks = [count.recount(failing), count.recount(failing)].map((p) =>
    p.then(
      () => "counted",
      (err: Error) => err.message,
    ),
  );
  expect(await Promise.all(asks)).toEqual(["unreadable", "unreadable"]);
  await count.recount(failing);
  expect(count.now().files).toBe(40);
});
