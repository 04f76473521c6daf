import { describe, expect, spyOn, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listingKey, MEMO_FOLDER, MEMO_NAME, memoPath } from "../../src/plan/listing-memo.ts";
import { realMemoEdges } from "../../src/plan/listing-memo-fs.ts";
import { drives } from "../../src/util/drive-answers.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("the listing memo's real edges", () => {
  // Its write was synchronous on the core's loop: a data_dir on a share gone dead held ping and
  // cancel in it. The drive is asked off the loop first; one that does not answer is not written.
  test("a data_dir whose drive does not answer is not written, nor waited on", async () => {
    using dir = tmpdir();
    const late = spyOn(drives, "answers").mockImplementation(async () => false);
    try {
      await expect(realMemoEdges.write(dir.path, "x\n", () => true)).rejects.toThrow();
    } finally {
      late.mockRestore();
    }
    expect(readdirSync(dir.path)).toEqual([]);
    // A core stopping meanwhile writes nothing either (its data_dir may be going).
    await realMemoEdges.write(dir.path, "x\n", () => false);
    expect(readdirSync(dir.path)).toEqual([]);
  });

  // A listing that found devices removes the memo even where its read came late (listing-memo.ts
  // `wrote`): a drive gone dead, its rm held a thread of the runtime's pool for good, one more at
  // each such listing, and the core's other file work waited with them. Asked first, as a write.
  test("a data_dir whose drive does not answer has no memo removed, nor waited on", async () => {
    using dir = tmpdir();
    await realMemoEdges.write(dir.path, "x\n", () => true);
    const late = spyOn(drives, "answers").mockImplementation(async () => false);
    try {
      await expect(realMemoEdges.remove(memoPath(dir.path))).rejects.toThrow();
    } finally {
      late.mockRestore();
    }
    expect(existsSync(memoPath(dir.path))).toBe(true);
    await realMemoEdges.remove(memoPath(dir.path));
    expect(existsSync(memoPath(dir.path))).toBe(false);
  });

  test("the write itself is off the loop: it turns between the memo's folder and its file", async () => {
    // Once its drive had answered, the folder, the temp, its bytes and the rename were all
    // synchronous: a slow disk held ping and cancel for each. Seen from the loop, each turn.
    using dir = tmpdir();
    const folder = join(dir.path, MEMO_FOLDER);
    const seen = new Set<string>();
    let done = false;
    const writing = realMemoEdges
      .write(dir.path, "x\n", () => true)
      .finally(() => {
        done = true;
      });
    while (!done) {
      await new Promise((r) => setImmediate(r));
      seen.add(`${existsSync(folder)}/${existsSync(memoPath(dir.path))}`);
    }
    await writing;
    expect(seen).toContain("true/false");
    expect(existsSync(memoPath(dir.path))).toBe(true);
  });

  test("a core that begins to stop while the memo is written makes no folder or temp after it", async () => {
    // Its checks were one, before the first folder: the folder, the temp's create and bytes went
    // on past a stop, and a data_dir the host removes meanwhile could be made again.
    using dir = tmpdir();
    let asked = 0;
    await realMemoEdges.write(dir.path, "x\n", () => asked++ === 0);
    expect(readdirSync(dir.path)).toEqual([]);
  });

  test("a listing that wants the memo gone while it is written: none left", async () => {
    // The write now takes turns of the loop: a listing that found devices meanwhile (`going`
    // false since) must not find a stale "none" memo landed after it (listing-memo.ts learned).
    using dir = tmpdir();
    let asked = 0;
    // Still going at the drive's check, the folder's and the temp's; not at the rename.
    await realMemoEdges.write(dir.path, "x\n", () => asked++ < 3);
    expect(existsSync(memoPath(dir.path))).toBe(false);
    expect(readdirSync(join(dir.path, MEMO_FOLDER))).toEqual([]);
  });

  test("written owner-only through a temp and a rename; read back; no temp left", async () => {
    using dir = tmpdir();
    await realMemoEdges.write(dir.path, '{"version":1}\n', () => true);
    expect(await realMemoEdges.read(memoPath(dir.path), 4096)).toBe('{"version":1}\n');
    if (process.platform !== "win32") expect(statSync(memoPath(dir.path)).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(dir.path, MEMO_FOLDER))).toEqual([MEMO_NAME]);
  });

  test("a temp left by a core killed mid-write is reused, not one more left beside it", async () => {
    using dir = tmpdir();
    mkdirSync(join(dir.path, MEMO_FOLDER));
    writeFileSync(join(dir.path, MEMO_FOLDER, `${MEMO_NAME}.tmp`), "half");
    await realMemoEdges.write(dir.path, "whole\n", () => true);
    expect(readdirSync(join(dir.path, MEMO_FOLDER))).toEqual([MEMO_NAME]);
    expect(await realMemoEdges.read(memoPath(dir.path), 4096)).toBe("whole\n");
  });

  test("missing: null; a link or an oversized file: refused; a link replaced by the next write", async () => {
    using dir = tmpdir();
    expect(await realMemoEdges.read(memoPath(dir.path), 4096)).toBeNull();
    mkdirSync(join(dir.path, MEMO_FOLDER));
    const elsewhere = join(dir.path, "elsewhere.json");
    writeFileSync(elsewhere, '{"version":1}');
    symlinkSync(elsewhere, memoPath(dir.path));
    await expect(realMemoEdges.read(memoPath(dir.path), 4096)).rejects.toThrow();
    await realMemoEdges.write(dir.path, "new\n", () => true);
    expect(await realMemoEdges.read(memoPath(dir.path), 4096)).toBe("new\n");
    expect(await Bun.file(elsewhere).text()).toBe('{"version":1}');
    writeFileSync(memoPath(dir.path), "x".repeat(5000));
    await expect(realMemoEdges.read(memoPath(dir.path), 4096)).rejects.toThrow();
  });

  test("read as the core's own file only: another user's is refused", async () => {
    using dir = tmpdir();
    await realMemoEdges.write(dir.path, "mine\n", () => true);
    const uid = process.getuid?.();
    if (uid === undefined) return;
    const getuid = spyOn(process, "getuid").mockReturnValue(uid + 1);
    try {
      await expect(realMemoEdges.read(memoPath(dir.path), 4096)).rejects.toThrow("another user");
    } finally {
      getuid.mockRestore();
    }
  });

  test("a folder of more names than the bound is no listing; the key sees a backend library", async () => {
    using dir = tmpdir();
    const bin = join(dir.path, "llama-server");
    writeFileSync(bin, "bin");
    writeFileSync(join(dir.path, "libggml-cpu.so"), "lib");
    expect(await realMemoEdges.names(dir.path, 2)).toHaveLength(2);
    expect(await realMemoEdges.names(dir.path, 1)).toBeNull();
    const before = await listingKey(bin, realMemoEdges);
    writeFileSync(join(dir.path, "libggml-cpu.so"), "lib, rebuilt");
    expect(await listingKey(bin, realMemoEdges)).not.toBe(before);
  });
});
