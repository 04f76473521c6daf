import { afterEach, expect, spyOn, test } from "bun:test";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { ERASE_PASS } from "../../../src/agent/kv/kv-reads.ts";
import { kvErased } from "../../../src/methods/kv-erased.ts";
import { CoreError } from "../../../src/protocol/errors.ts";
import { logger } from "../../../src/util/logger.ts";
import { savedPairs, savingOnNoReuse } from "../../fixtures/kv-saved.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// An erase over several turns of the loop (kv-reads.ts `readInPasses`) that threw was only logged
// (drop-file.ts `Zeroes.hold`) and the delete answered ok, its files possibly still on disk.
afterEach(() => {
  Object.defineProperty(ERASE_PASS, "max", {
    value: 64,
    writable: true,
    configurable: true,
    enumerable: true,
  });
});

/** The first pass reads its sidecars; the one after throws (the failure injected). */
function failingSecondPass(): { n: number } {
  const asked = { n: 0 };
  Object.defineProperty(ERASE_PASS, "max", {
    get() {
      asked.n += 1;
      if (asked.n > 1) throw new Error("injected");
      return 2;
    },
    configurable: true,
  });
  return asked;
}

test("an erase over several turns that fails fails its delete, as a file it could not remove does", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 12, () => ["document:d"]);
  const asked = failingSecondPass();
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const erase = savingOnNoReuse(disk);
    const left = erase.forgetSource("u", "document:d");
    const answer = kvErased(left, { kvZeroed: (l) => erase.zeroed(l) });
    await expect(answer).rejects.toBeInstanceOf(CoreError);
  } finally {
    warn.mockRestore();
  }
  expect(asked.n).toBeGreaterThan(1);
  await disk.zeroes.done();
});

// The same failure in a memory folder file's erase (no request to fail) was logged as the folder
// being a file that "could not be removed: tried again at the next erase": nothing is tried again.
test("a memory folder's erase over several turns that fails is logged as such, not as a file kept to retry", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 12, () => ["file:/m/a.md"]);
  failingSecondPass();
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const erase = savingOnNoReuse(disk);
    const left = erase.folderGone("file:/m/a.md");
    await erase.zeroed(left);
    await disk.zeroes.done();
    const said = warn.mock.calls.map(([m]) => String(m));
    expect(said.some((m) => m.includes("tried again") && m.includes(`(${dir.path})`))).toBe(false);
    expect(said.some((m) => m.includes(dir.path) && m.includes("failed part way"))).toBe(true);
  } finally {
    warn.mockRestore();
  }
});
