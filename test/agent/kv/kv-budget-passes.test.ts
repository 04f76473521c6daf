import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { COUNT_PASS } from "../../../src/agent/kv/kv-use.ts";
import { countedUse, saved, savedPair, savedPairs } from "../../fixtures/kv-saved.ts";
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

/**
 * User u's "new" saved into `disk`, `during` asked at each turn of the loop meanwhile until it says
 * it is done, with the paths `fn` of node:fs (spied on) was called on so far.
 */
async function savedWhile(
  disk: KvDisk,
  fn: "openSync" | "lstatSync",
  during: (paths: () => string[]) => boolean,
): Promise<void> {
  const spy = spyOn(fs, fn);
  const paths = () => spy.mock.calls.map(([p]) => String(p));
  let over = false;
  const tick = () => {
    if (!over) over = during(paths);
    if (!over) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    await saved(disk, "new");
  } finally {
    over = true;
    spy.mockRestore();
  }
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
  expect(await countedUse(disk)).toEqual(await countedUse(new KvDisk(dir.path, 1 << 30)));
  expect((await countedUse(disk)).files).toBe(401);
  await disk.zeroes.done();
});

test("a save over the budget still evicts the least recently used, over several turns", async () => {
  using dir = tmpdir();
  const probe = new KvDisk(dir.path, 1 << 30);
  savedPairs(probe, 300);
  const all = (await countedUse(probe)).bytes;
  // Room for all but about ten of them once the new one is in.
  const disk = new KvDisk(dir.path, all - 1);
  const path = await saved(disk, "new");
  expect(fs.existsSync(path)).toBe(true);
  const after = await countedUse(new KvDisk(dir.path, 1 << 30));
  expect(after.bytes).toBeLessThanOrEqual(all - 1);
  expect(await countedUse(disk)).toEqual(after);
  expect(after.files).toBeLessThan(301);
  expect(fs.existsSync(join(dir.path, `${disk.nameOf("u", "new")}.json`))).toBe(true);
  await Promise.all([disk.zeroes.done(), probe.zeroes.done()]);
});

test("this core's removals while a save counts the folder are in the count it puts in place", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  const planted = new Set(savedPairs(disk, 400).flatMap((b) => [b, b.replace(/\.bin$/, ".json")]));
  await countedUse(disk);
  // A removal a turn while the count is part way (it was a removal a turn from the save's start,
  // as many turns as the save happened to take: some ran before the count, or after it).
  COUNT_PASS.max = 32;
  let removed = 0;
  let byRemovals = 0;
  try {
    await savedWhile(disk, "lstatSync", (paths) => {
      const stats = () => paths().filter((p) => planted.has(p)).length;
      const counted = stats() - byRemovals;
      if (counted > 0 && counted < planted.size && removed < 8) {
        const before = stats();
        disk.remove(disk.nameOf("u", `s${removed * 37}`));
        byRemovals += stats() - before;
        removed += 1;
      }
      return false;
    });
  } finally {
    COUNT_PASS.max = 256;
  }
  expect(removed).toBe(8);
  expect(await countedUse(disk)).toEqual(await countedUse(new KvDisk(dir.path, 1 << 30)));
  expect((await countedUse(disk)).files).toBe(393);
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
  const budgeted = new KvDisk(dir.path, (await countedUse(disk)).bytes, () => clock);
  let touched = false;
  const sidecars = new Set(jsons.map((f) => join(dir.path, f)));
  await savedWhile(budgeted, "openSync", (opened) => {
    const read = opened().filter((p) => sidecars.has(p)).length;
    if (read === 0 || read >= sidecars.size) return false;
    // Restored now: the most recently used.
    clock = 10 ** 9;
    touched = true;
    budgeted.touch(budgeted.entry("u", session)!);
    return true;
  });
  expect(touched).toBe(true);
  expect(budgeted.entry("u", session)?.used_at).toBe(10 ** 9);
  expect(budgeted.hasState(budgeted.nameOf("u", session))).toBe(true);
  // Others went in its place.
  expect((await countedUse(budgeted)).files).toBeLessThan(201);
  await Promise.all([disk.zeroes.done(), budgeted.zeroes.done()]);
});

// The pass took off what a stat found of each state it evicted: one another core erased while the
// pass read the sidecars was still in the count and freed nothing, so the pass evicted every
// other state and then the one just saved, which fit.
test("another core's erase while a save's budget pass reads the sidecars does not evict the state just saved", async () => {
  using dir = tmpdir();
  const other = new KvDisk(dir.path, 1 << 30);
  savedPairs(other, 150);
  const small = (await countedUse(new KvDisk(dir.path, 1 << 30))).bytes;
  // The oldest is large, over what the budget leaves: once it is gone, all fit, the new one too.
  savedPair(other, "big", [], "y".repeat(50_000));
  const big = join(dir.path, `${other.nameOf("u", "big")}.json`);
  fs.writeFileSync(big, JSON.stringify({ ...JSON.parse(fs.readFileSync(big, "utf8")), used_at: 0 }));
  const disk = new KvDisk(dir.path, small + 5_000);
  let erased = false;
  // Between two of the pass's turns, the large one read or not yet.
  await savedWhile(disk, "openSync", (opened) => {
    if (!opened().some((p) => p.endsWith(".json") && !p.includes(".tmp"))) return false;
    other.removeSession("u", "big");
    erased = true;
    return true;
  });
  expect(erased).toBe(true);
  expect(disk.hasState(disk.nameOf("u", "new"))).toBe(true);
  expect(await countedUse(disk)).toEqual(await countedUse(new KvDisk(dir.path, 1 << 30)));
  expect((await countedUse(disk)).files).toBe(151);
  await Promise.all([disk.zeroes.done(), other.zeroes.done()]);
});
