import { afterEach, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { existsSync } from "node:fs";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { ERASE_PASS } from "../../../src/agent/kv/kv-reads.ts";
import { kvErased } from "../../../src/methods/kv-erased.ts";
import { logger } from "../../../src/util/logger.ts";
import { savedPairs, savingOnNoReuse } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// An erase read every sidecar of the KV folder (up to 16 MiB each) in one go on the main loop: a
// folder of thousands of sessions, or files planted in a shared data_dir, held ping and cancel for
// the whole erase. The sidecars are read a bounded number a turn of the loop now, with the same result.
const max = ERASE_PASS.max;
afterEach(() => {
  ERASE_PASS.max = max;
});

/** `n` sessions of user u saved, the even ones quoting `document:d`; their state paths. */
const sessions = (disk: KvDisk, n: number) => savedPairs(disk, n, (i) => (i % 2 === 0 ? ["document:d"] : []));

test("the loop turns while an erase reads a folder of many sidecars; the same files go", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  const bins = sessions(disk, 40);
  ERASE_PASS.max = 4;
  const read = spyOn(fs, "readSync");
  let readsByFirstTurn = -1;
  setImmediate(() => {
    readsByFirstTurn = read.mock.calls.length;
  });
  try {
    const erase = savingOnNoReuse(disk);
    const left = erase.forgetSource("u", "document:d");
    await kvErased(left, { kvZeroed: (l) => erase.zeroed(l) });
  } finally {
    read.mockRestore();
  }
  // The first turn of the loop came after a bounded number of sidecar reads, not all 40.
  expect(readsByFirstTurn).toBeGreaterThanOrEqual(0);
  expect(readsByFirstTurn).toBeLessThan(40);
  expect(bins.map((b) => existsSync(b))).toEqual(bins.map((_, i) => i % 2 === 1));
  expect(bins.map((b) => existsSync(b.replace(/\.bin$/, ".json")))).toEqual(bins.map((_, i) => i % 2 === 1));
});

test("a file an erase over several turns could not remove still fails its delete", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  const bins = sessions(disk, 12);
  ERASE_PASS.max = 2;
  const stuck = bins[10] as string;
  const real = fs.unlinkSync;
  const unlink = spyOn(fs, "unlinkSync").mockImplementation((path) => {
    if (String(path) === stuck) throw Object.assign(new Error("EBUSY: resource busy"), { code: "EBUSY" });
    real(path);
  });
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const erase = savingOnNoReuse(disk);
    const left = erase.forgetSource("u", "document:d");
    await expect(kvErased(left, { kvZeroed: (l) => erase.zeroed(l) })).rejects.toThrow(
      "could not be removed",
    );
    expect(left).toEqual([stuck]);
  } finally {
    unlink.mockRestore();
    warn.mockRestore();
  }
});
