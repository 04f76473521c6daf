import { expect, spyOn, test } from "bun:test";
import * as crypto from "node:crypto";
import * as fs from "node:fs";
import { join } from "node:path";
import { stageFileAtomic } from "../../src/store/atomic.ts";
import { exportToFile } from "../../src/store/export-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// A temp file's fresh name found taken (EEXIST: another program's file, another core's temp, a
// link planted there): the core's open created nothing, yet its clean-up dropped the temp by name,
// zeroing and removing a file that was never its own. The name's owner keeps it; another random
// name is tried instead (a bounded number of times).

const THEIRS = "someone else's file at the name\n";

/** randomBytes giving `first` for its first `times` calls of `size` bytes, then real ones. */
function fixedRandom(size: number, first: Buffer, times: number) {
  const real = crypto.randomBytes;
  let left = times;
  return spyOn(crypto, "randomBytes").mockImplementation(((n: number) => {
    if (n === size && left > 0) {
      left--;
      return Buffer.from(first);
    }
    return real(n);
  }) as typeof crypto.randomBytes);
}

test("a staged write whose random temp name is taken tries another, the file there kept", () => {
  using dir = tmpdir();
  const taken = join(dir.path, ".aaaaaaaaaaaa.tmp");
  fs.writeFileSync(taken, THEIRS);
  const rnd = fixedRandom(6, Buffer.from("aaaaaaaaaaaa", "hex"), 1);
  try {
    stageFileAtomic(join(dir.path, "turns.json"), "ours").commit();
  } finally {
    rnd.mockRestore();
  }
  expect(fs.readFileSync(taken, "utf8")).toBe(THEIRS);
  expect(fs.readFileSync(join(dir.path, "turns.json"), "utf8")).toBe("ours");
  expect(fs.readdirSync(dir.path).sort()).toEqual([".aaaaaaaaaaaa.tmp", "turns.json"]);
});

test("a staged write whose given temp name is taken fails, the file there kept", () => {
  using dir = tmpdir();
  const taken = join(dir.path, "s-1.123-abcd.tmp");
  fs.writeFileSync(taken, THEIRS);
  let removed = "";
  const err = (() => {
    try {
      stageFileAtomic(join(dir.path, "s-1.json"), "ours", "s-1.123-abcd.tmp", (t) => {
        removed = t;
      });
    } catch (e) {
      return e as NodeJS.ErrnoException;
    }
  })();
  expect(err?.code).toBe("EEXIST");
  expect(removed).toBe("");
  expect(fs.readFileSync(taken, "utf8")).toBe(THEIRS);
});

test("a staged write gives up after a bounded number of taken names, removing none", () => {
  using dir = tmpdir();
  const taken = join(dir.path, ".bbbbbbbbbbbb.tmp");
  fs.writeFileSync(taken, THEIRS);
  const rnd = fixedRandom(6, Buffer.from("bbbbbbbbbbbb", "hex"), 1000);
  let err: NodeJS.ErrnoException | undefined;
  try {
    stageFileAtomic(join(dir.path, "turns.json"), "ours");
  } catch (e) {
    err = e as NodeJS.ErrnoException;
  } finally {
    rnd.mockRestore();
  }
  expect(err?.code).toBe("EEXIST");
  expect(fs.readFileSync(taken, "utf8")).toBe(THEIRS);
});

test("an export whose temp name is taken tries another, the file there kept", async () => {
  using dir = tmpdir();
  const taken = join(dir.path, ".export.md.cccccccccccc.tmp");
  fs.writeFileSync(taken, THEIRS);
  async function* pieces() {
    yield "the export";
  }
  const rnd = fixedRandom(6, Buffer.from("cccccccccccc", "hex"), 1);
  let bytes: number;
  try {
    bytes = await exportToFile(join(dir.path, "export.md"), pieces(), join(dir.path, "data"));
  } finally {
    rnd.mockRestore();
  }
  expect(bytes).toBe(10);
  expect(fs.readFileSync(taken, "utf8")).toBe(THEIRS);
  expect(fs.readFileSync(join(dir.path, "export.md"), "utf8")).toBe("the export");
  expect(fs.readdirSync(join(dir.path, "data", "run", "exports"))).toEqual([]);
});
