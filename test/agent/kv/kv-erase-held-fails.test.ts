import { afterEach, expect, spyOn, test } from "bun:test";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
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

// Its delete named the KV folder as the file (`data.file`) of "1 saved KV state file(s) could
// not be removed": a host showed a folder as a file that stayed, and which stayed is not known.
test("an erase over several turns that fails fails its delete, naming the folder as such, not as a file", async () => {
  using dir = tmpdir();
  const kv = join(dir.path, "kv");
  const disk = new KvDisk(kv, 1 << 30);
  mkdirSync(kv);
  savedPairs(disk, 12, () => ["document:d"]);
  const asked = failingSecondPass();
  const warn = spyOn(logger, "warn").mockImplementation(() => {});
  let err: unknown;
  try {
    const erase = savingOnNoReuse(disk);
    const left = erase.forgetSource("u", "document:d");
    const config = () => ({ app: { data_dir: dir.path } }) as never;
    err = await kvErased(left, { kvZeroed: (l) => erase.zeroed(l), config }).catch((e: unknown) => e);
  } finally {
    warn.mockRestore();
  }
  expect(err).toBeInstanceOf(CoreError);
  const { message, data } = err as CoreError;
  expect(data).toEqual({ key: "app.data_dir", files: [], files_count: 0, folder: kv });
  expect(message).toContain(`failed part way over ${kv}`);
  expect(message).not.toContain("file(s)");
  expect(asked.n).toBeGreaterThan(1);
  await disk.zeroes.done();
});

test("many files left: the message names the first few and counts them, the data lists them as listings do", async () => {
  const left = Array.from({ length: 150 }, (_, i) => `/d/kv/s${String(i).padStart(3, "0")}.bin`);
  const config = () => ({ app: { data_dir: "/d" } }) as never;
  const err = await kvErased(left, { kvZeroed: async () => {}, config }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CoreError);
  const { message, data } = err as CoreError;
  expect(data).toMatchObject({ key: "app.data_dir", file: left[0], files_count: 150 });
  expect(data?.files).toHaveLength(100);
  expect(message).toContain("150 saved KV state files could not be removed");
  expect(message).toContain("… (150 in all)");
  expect(message.length).toBeLessThan(1000);
  const one = await kvErased([left[0]!], { kvZeroed: async () => {}, config }).catch((e: unknown) => e);
  expect((one as CoreError).message).toContain(`1 saved KV state file could not be removed (${left[0]};`);
  expect((one as CoreError).data).toEqual({
    key: "app.data_dir",
    file: left[0],
    files: [left[0]],
    files_count: 1,
  });
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
