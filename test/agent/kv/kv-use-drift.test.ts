import { expect, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { countedUse, saved } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Two cores on one data_dir. The count kept by this core's changes took out of it, at a removal,
// what a stat found then: another core's state (never counted here) removed made it negative, one
// the other core had removed already stayed in it, until this core's next save (`status` lied).

test("removing another core's state never takes the count below what the folder holds", async () => {
  using dir = tmpdir();
  const one = new KvDisk(dir.path, 1 << 30);
  const two = new KvDisk(dir.path, 1 << 30);
  expect(await countedUse(one)).toEqual({ bytes: 0, files: 0 });
  await saved(two, "b");
  one.removeSession("u", "b");
  expect(await countedUse(one)).toEqual({ bytes: 0, files: 0 });
  await Promise.all([one.zeroes.done(), two.zeroes.done()]);
});

test("a state another core removed leaves this core's count at this core's next change of it", async () => {
  using dir = tmpdir();
  const one = new KvDisk(dir.path, 1 << 30);
  const two = new KvDisk(dir.path, 1 << 30);
  await saved(one, "a");
  await saved(one, "b");
  const both = await countedUse(one);
  two.removeSession("u", "a");
  one.removeSession("u", "a");
  expect(await countedUse(one)).toEqual(await countedUse(new KvDisk(dir.path, 1 << 30)));
  expect((await countedUse(one)).files).toBe(both.files - 1);
  await Promise.all([one.zeroes.done(), two.zeroes.done()]);
});
