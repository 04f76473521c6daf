import { expect, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { saved } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Two cores on one data_dir. The count kept by this core's changes took out of it, at a removal,
// what a stat found then: another core's state (never counted here) removed made it negative, one
// the other core had removed already stayed in it, until this core's next save (`status` lied).

test("removing another core's state never takes the count below what the folder holds", async () => {
  using dir = tmpdir();
  const one = new KvDisk(dir.path, 1 << 30);
  const two = new KvDisk(dir.path, 1 << 30);
  expect(await one.counted()).toEqual({ bytes: 0, files: 0 });
  await saved(two, "b");
  one.removeSession("u", "b");
  expect(await one.counted()).toEqual({ bytes: 0, files: 0 });
  await Promise.all([one.zeroes.done(), two.zeroes.done()]);
});

test("a state another core removed leaves this core's count at this core's next change of it", async () => {
  using dir = tmpdir();
  const one = new KvDisk(dir.path, 1 << 30);
  const two = new KvDisk(dir.path, 1 << 30);
  await saved(one, "a");
  await saved(one, "b");
  const both = await one.counted();
  two.removeSession("u", "a");
  one.removeSession("u", "a");
  expect(await one.counted()).toEqual(await new KvDisk(dir.path, 1 << 30).counted());
  expect((await one.counted()).files).toBe(both.files - 1);
  await Promise.all([one.zeroes.done(), two.zeroes.done()]);
});
