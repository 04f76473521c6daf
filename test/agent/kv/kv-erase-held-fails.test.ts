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

test("an erase over several turns that fails fails its delete, as a file it could not remove does", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  savedPairs(disk, 12, () => ["document:d"]);
  let asked = 0;
  // The first pass reads its sidecars; the one after throws (the failure injected).
  Object.defineProperty(ERASE_PASS, "max", {
    get() {
      asked += 1;
      if (asked > 1) throw new Error("injected");
      return 2;
    },
    configurable: true,
  });
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  try {
    const erase = savingOnNoReuse(disk);
    const left = erase.forgetSource("u", "document:d");
    const answer = kvErased(left, { kvZeroed: (l) => erase.zeroed(l) });
    await expect(answer).rejects.toBeInstanceOf(CoreError);
  } finally {
    warn.mockRestore();
  }
  expect(asked).toBeGreaterThan(1);
  await disk.zeroes.done();
});
