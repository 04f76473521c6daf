import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { exportToFile } from "../../src/store/export-file.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

async function* pieces(): AsyncIterable<string> {
  yield "hello ";
  yield "world";
}

// The note of an export under way (store/export-temps.ts) lives under data_dir; a data_dir that
// cannot take it (full, not writable) must not fail an export to a path elsewhere.
describe("exportToFile's note under data_dir", () => {
  test("a data_dir that cannot hold the note leaves the export to another folder done", async () => {
    await using dir = tmpdir();
    const dataDir = join(dir.path, "data");
    writeFileSync(dataDir, "not a folder");
    const target = join(dir.path, "export.md");
    expect(await exportToFile(target, pieces(), dataDir)).toBe(11);
    expect(readFileSync(target, "utf8")).toBe("hello world");
  });

  // A real full file system (a tmpfs: root on Linux), else skipped and said so.
  const disk = smallDisk("1m", "export note on a full data_dir");
  afterAll(() => disk.dispose());

  test.skipIf(!disk.mounted)(
    "a data_dir on a full disk: the export is done, and no empty note stays there",
    async () => {
      await using dir = tmpdir();
      const dataDir = join(disk.path, "data");
      mkdirSync(join(dataDir, "run", "exports"), { recursive: true });
      fillDisk(join(disk.path, "filler"));
      const target = join(dir.path, "export.md");
      expect(await exportToFile(target, pieces(), dataDir)).toBe(11);
      expect(readFileSync(target, "utf8")).toBe("hello world");
      expect(readdirSync(join(dataDir, "run", "exports"))).toEqual([]);
    },
  );
});
