import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { saved, savedPairs } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Each save counted the whole KV folder (a stat a file, other cores' states included) on the main
// loop for its budget: a large shared folder (10^5 files), or one planted full, stalled ping at
// every save. The count goes a bounded number of files a turn of the loop now, with the same result.

/** Turns of the loop until `stop()`, each noting how many of `paths` had been stat'ed by then. */
function turns(stat: { mock: { calls: unknown[][] } }, paths: Set<string>) {
  const seen: number[] = [];
  let going = true;
  const tick = () => {
    seen.push(stat.mock.calls.filter(([p]) => paths.has(String(p))).length);
    if (going) setImmediate(tick);
  };
  setImmediate(tick);
  return {
    seen,
    stop: () => {
      going = false;
    },
  };
}

test("the loop turns while a save counts a large folder for its budget; the count is a fresh one's", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  const bins = savedPairs(disk, 400);
  const planted = new Set(bins.flatMap((b) => [b, b.replace(/\.bin$/, ".json")]));
  const stat = spyOn(fs, "lstatSync");
  const loop = turns(stat, planted);
  try {
    await saved(disk, "new");
  } finally {
    loop.stop();
    stat.mockRestore();
  }
  // Some turn came with part of the folder counted, not none or all of it.
  expect(loop.seen.some((n) => n > 0 && n < planted.size)).toBe(true);
  expect(disk.usage()).toEqual(new KvDisk(dir.path, 1 << 30).usage());
  expect(disk.usage().files).toBe(401);
  await disk.zeroes.done();
});

test("a save over the budget still evicts the least recently used, over several turns", async () => {
  using dir = tmpdir();
  const probe = new KvDisk(dir.path, 1 << 30);
  savedPairs(probe, 300);
  const all = probe.usage().bytes;
  // Room for all but about ten of them once the new one is in.
  const disk = new KvDisk(dir.path, all - 1);
  const path = await saved(disk, "new");
  expect(fs.existsSync(path)).toBe(true);
  const after = new KvDisk(dir.path, 1 << 30).usage();
  expect(after.bytes).toBeLessThanOrEqual(all - 1);
  expect(disk.usage()).toEqual(after);
  expect(after.files).toBeLessThan(301);
  expect(fs.existsSync(join(dir.path, `${disk.nameOf("u", "new")}.json`))).toBe(true);
  await Promise.all([disk.zeroes.done(), probe.zeroes.done()]);
});

test("this core's removals while a save counts the folder are in the count it puts in place", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 400);
  disk.usage();
  let removed = 0;
  const remove = () => {
    disk.remove(disk.nameOf("u", `s${removed * 37}`));
    removed += 1;
    if (removed < 8) setImmediate(remove);
  };
  setImmediate(remove);
  await saved(disk, "new");
  expect(removed).toBe(8);
  expect(disk.usage()).toEqual(new KvDisk(dir.path, 1 << 30).usage());
  expect(disk.usage().files).toBe(393);
  await disk.zeroes.done();
});

// A save's budget pass read the sidecars over several turns and evicted by what it had read: a
// state restored (touched) or saved again meanwhile went as the least recently used it had been.
test("a state used while a save's budget pass reads the sidecars is not evicted as the oldest", async () => {
  using dir = tmpdir();
  let clock = 1000;
  const disk = new KvDisk(dir.path, 1 << 30, () => clock);
  savedPairs(disk, 200);
  // The first sidecar the pass reads is the oldest; the others in order after it.
  const jsons = fs.readdirSync(dir.path).filter((f) => f.endsWith(".json"));
  jsons.forEach((f, i) => {
    const path = join(dir.path, f);
    fs.writeFileSync(path, JSON.stringify({ ...JSON.parse(fs.readFileSync(path, "utf8")), used_at: 10 + i }));
  });
  const first = join(dir.path, jsons[0] as string);
  const session = JSON.parse(fs.readFileSync(first, "utf8")).session_id as string;
  const budgeted = new KvDisk(dir.path, disk.usage().bytes, () => clock);
  const open = spyOn(fs, "openSync");
  let touched = false;
  const sidecars = new Set(jsons.map((f) => join(dir.path, f)));
  const tick = () => {
    const read = open.mock.calls.filter(([p]) => sidecars.has(String(p))).length;
    if (!touched && read > 0 && read < sidecars.size) {
      // Restored now: the most recently used.
      clock = 10 ** 9;
      touched = true;
      budgeted.touch(budgeted.entry("u", session)!);
    }
    if (read < sidecars.size) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    await saved(budgeted, "new");
  } finally {
    open.mockRestore();
  }
  expect(touched).toBe(true);
  expect(budgeted.entry("u", session)?.used_at).toBe(10 ** 9);
  expect(budgeted.hasState(budgeted.nameOf("u", session))).toBe(true);
  // Others went in its place.
  expect(budgeted.usage().files).toBeLessThan(201);
  await Promise.all([disk.zeroes.done(), budgeted.zeroes.done()]);
});
