import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { KvDisk } from "../../src/agent/kv/kv-disk.ts";
import { saved, savingOnNoReuse } from "../fixtures/kv-saved.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A delete answers once the files IT removed are zeroed (docs/agent.md, The store). It waited for
// every zeroing under way on the core instead: a sessions.delete of one session hung behind another
// session's removal parked for a save or restore that did not answer (its erase asked up to 3
// times, about 4 minutes on a server that takes requests and answers none).

test("a delete waits for its own files' zeroing, not another session's parked one", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1_000_000);
  const a = await saved(disk, "a");
  await saved(disk, "b");
  // Session a's state is being read by a restore that did not answer: its removal is parked.
  disk.zeroes.begin(a);
  const erase = savingOnNoReuse(disk);
  const leftA = erase.forget("u", "a");
  expect(existsSync(a)).toBe(false);
  let aZeroed = false;
  void erase.zeroed(leftA).then(() => {
    aZeroed = true;
  });
  let allZeroed = false;
  void erase.zeroed().then(() => {
    allZeroed = true;
  });
  // Without the fix this never resolves while a's restore is under way (the test's limit fails it).
  await erase.zeroed(erase.forget("u", "b"));
  expect(aZeroed).toBe(false);
  // Shutdown still waits for every zeroing.
  expect(allZeroed).toBe(false);
  disk.zeroes.settled(a);
  await erase.zeroed(leftA);
  expect(aZeroed).toBe(true);
  await erase.zeroed();
  expect(allZeroed).toBe(true);
}, 2_000);
