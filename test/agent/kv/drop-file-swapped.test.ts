import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { dropFile, Zeroes } from "../../../src/agent/kv/drop-file.ts";
import { holdOpen } from "../../fixtures/held-file.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Two cores on one data folder (docs/agent.md, "Files of erased words are zeroed before they
// go"): dropFile opened a session's state file to zero it, then unlinked it by its name. Another
// core renaming its fresh save of that session onto the name in between had that save unlinked
// unzeroed, its tokens left in the disk's blocks after the erase. The rename is made here right
// after the open's own check (the first lstat once the file is opened), as that core's would land.
test("a save renamed onto the name after the open is zeroed too, not unlinked unzeroed", async () => {
  using dir = tmpdir();
  const path = join(dir.path, `s-${"a".repeat(32)}.bin`);
  const fresh = join(dir.path, "other-core-save.tmp");
  fs.writeFileSync(path, "older tokens of my secret\n".repeat(100));
  fs.writeFileSync(fresh, "fresher tokens of my secret\n".repeat(100));
  using older = holdOpen(path);
  using newer = holdOpen(fresh);
  const realOpen = fs.openSync;
  const realLstat = fs.lstatSync;
  let opened = false;
  let swapped = false;
  const open = spyOn(fs, "openSync").mockImplementation(((p: fs.PathLike, flags: number) => {
    const fd = realOpen(p, flags);
    if (p === path) opened = true;
    return fd;
  }) as typeof fs.openSync);
  const lstat = spyOn(fs, "lstatSync").mockImplementation(((p: fs.PathLike) => {
    const stats = realLstat(p);
    if (opened && !swapped && p === path) {
      swapped = true;
      fs.renameSync(fresh, path);
    }
    return stats;
  }) as typeof fs.lstatSync);
  const zeroes = new Zeroes();
  try {
    expect(dropFile(path, zeroes)).toBe(true);
  } finally {
    open.mockRestore();
    lstat.mockRestore();
  }
  await zeroes.done();
  expect(swapped).toBe(true);
  expect(fs.existsSync(path)).toBe(false);
  expect(older.zeroed().allZero).toBe(true);
  expect(newer.zeroed()).toEqual({
    size: Buffer.byteLength("fresher tokens of my secret\n") * 100,
    allZero: true,
  });
});
