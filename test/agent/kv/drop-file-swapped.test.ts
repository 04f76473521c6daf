import { expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { dropFile, Zeroes } from "../../../src/agent/kv/drop-file.ts";
import { type HeldFile, holdOpen } from "../../fixtures/held-file.ts";
import { swappingAfterOpen } from "../../fixtures/swap-after-open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Two cores on one data folder (docs/agent.md, "Files of erased words are zeroed before they
// go"): dropFile opened a session's state file to zero it, then unlinked it by its name. Another
// core renaming its fresh save of that session onto the name in between had that save unlinked
// unzeroed, its tokens left in the disk's blocks after the erase. The rename is made here right
// after the open's own check (fixtures/swap-after-open.ts), as that core's would land.

test("a save renamed onto the name after the open is zeroed too, not unlinked unzeroed", async () => {
  using dir = tmpdir();
  const path = join(dir.path, `s-${"a".repeat(32)}.bin`);
  const fresh = join(dir.path, "other-core-save.tmp");
  fs.writeFileSync(path, "older tokens of my secret\n".repeat(100));
  fs.writeFileSync(fresh, "fresher tokens of my secret\n".repeat(100));
  using older = holdOpen(path);
  using newer = holdOpen(fresh);
  let swapped = false;
  const zeroes = new Zeroes();
  const dropped = swappingAfterOpen(
    path,
    () => {
      if (swapped) return;
      swapped = true;
      fs.renameSync(fresh, path);
    },
    () => dropFile(path, zeroes),
  );
  expect(dropped).toBe(true);
  await zeroes.done();
  expect(swapped).toBe(true);
  expect(fs.existsSync(path)).toBe(false);
  expect(older.zeroed().allZero).toBe(true);
  expect(newer.zeroed()).toEqual({
    size: Buffer.byteLength("fresher tokens of my secret\n") * 100,
    allZero: true,
  });
});

// A save renamed onto the name after every open: the third open was not checked, so the save
// renamed after it was unlinked unzeroed.
test("a name swapped after each open never has a save unlinked unzeroed", async () => {
  using dir = tmpdir();
  const path = join(dir.path, `s-${"a".repeat(32)}.bin`);
  const text = (i: number) => `tokens ${i} of my secret\n`.repeat(100);
  fs.writeFileSync(path, text(0));
  const held: HeldFile[] = [holdOpen(path)];
  const inos = [fs.statSync(path).ino];
  const zeroes = new Zeroes();
  const dropped = swappingAfterOpen(
    path,
    () => {
      const fresh = join(dir.path, `other-core-save-${held.length}.tmp`);
      fs.writeFileSync(fresh, text(held.length));
      held.push(holdOpen(fresh));
      inos.push(fs.statSync(fresh).ino);
      fs.renameSync(fresh, path);
    },
    () => dropFile(path, zeroes),
  );
  // The name is left (said, and an erase fails on it) rather than unlinked unchecked.
  expect(dropped).toBe(false);
  await zeroes.done();
  const named = fs.statSync(path).ino;
  for (const [i, h] of held.entries()) {
    // Each save is either still at the name (left for a later removal) or zeroed.
    if (inos[i] !== named)
      expect({ i, ...h.zeroed() }).toEqual({ i, size: Buffer.byteLength(text(i)), allZero: true });
  }
  for (const h of held) h[Symbol.dispose]();
});

// The same swaps landing between each open and the open's own check (scrub-file.ts openNoLink,
// which gives up after 3 with ECHANGED): openToZero answered "cannot be opened" and dropFile
// unlinked the name unchecked, the save renamed there last gone unzeroed.
test("a name swapped inside each open's own check is left, never unlinked unzeroed", async () => {
  using dir = tmpdir();
  const path = join(dir.path, `s-${"a".repeat(32)}.bin`);
  fs.writeFileSync(path, "tokens 0 of my secret\n".repeat(100));
  let swaps = 0;
  const realOpen = fs.openSync;
  const open = spyOn(fs, "openSync").mockImplementation(((p: fs.PathLike, flags: number) => {
    const fd = realOpen(p, flags);
    if (p === path && (flags & fs.constants.O_RDWR) !== 0) {
      swaps++;
      fs.writeFileSync(`${path}.other`, `tokens ${swaps} of my secret\n`.repeat(100));
      fs.renameSync(`${path}.other`, path);
    }
    return fd;
  }) as typeof fs.openSync);
  const zeroes = new Zeroes();
  let dropped: boolean;
  try {
    dropped = dropFile(path, zeroes);
  } finally {
    open.mockRestore();
  }
  await zeroes.done();
  expect(swaps).toBeGreaterThanOrEqual(3);
  expect(dropped).toBe(false);
  expect(fs.readFileSync(path, "utf8")).toBe(`tokens ${swaps} of my secret\n`.repeat(100));
});
