import { describe, expect, spyOn, test } from "bun:test";
import { mkdirSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listingKey, MEMO_FOLDER, MEMO_NAME, memoPath } from "../../src/plan/listing-memo.ts";
import { realMemoEdges } from "../../src/plan/listing-memo-fs.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

describe("the listing memo's real edges", () => {
  test("written owner-only through a temp and a rename; read back; no temp left", async () => {
    using dir = tmpdir();
    realMemoEdges.write(dir.path, '{"version":1}\n');
    expect(await realMemoEdges.read(memoPath(dir.path), 4096)).toBe('{"version":1}\n');
    if (process.platform !== "win32") expect(statSync(memoPath(dir.path)).mode & 0o777).toBe(0o600);
    expect(readdirSync(join(dir.path, MEMO_FOLDER))).toEqual([MEMO_NAME]);
  });

  test("a temp left by a core killed mid-write is reused, not one more left beside it", async () => {
    using dir = tmpdir();
    mkdirSync(join(dir.path, MEMO_FOLDER));
    writeFileSync(join(dir.path, MEMO_FOLDER, `${MEMO_NAME}.tmp`), "half");
    realMemoEdges.write(dir.path, "whole\n");
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
    realMemoEdges.write(dir.path, "new\n");
    expect(await realMemoEdges.read(memoPath(dir.path), 4096)).toBe("new\n");
    expect(await Bun.file(elsewhere).text()).toBe('{"version":1}');
    writeFileSync(memoPath(dir.path), "x".repeat(5000));
    await expect(realMemoEdges.read(memoPath(dir.path), 4096)).rejects.toThrow();
  });

  test("read as the core's own file only: another user's is refused", async () => {
    using dir = tmpdir();
    realMemoEdges.write(dir.path, "mine\n");
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
