import { afterAll, describe, expect, spyOn, test } from "bun:test";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { pidSpace } from "../../src/platform/pid-space.ts";
import {
  pidFilePath,
  removePidRecord,
  removeRecordFile,
  writeMcpRecord,
  writePidRecord,
} from "../../src/runtime/pid-file.ts";
import { logger } from "../../src/util/logger.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const child = { pid: process.pid, binary: "/bin/true", argv: [] as string[] };

describe.skipIf(process.platform !== "linux")("pid records and links", () => {
  test("run/ a file: a record's removal at a stop warns naming the folder, never throws a raw errno", () => {
    using dir = tmpdir();
    writeFileSync(join(dir.path, "run"), "x");
    const lines: string[] = [];
    const warn = spyOn(logger, "warn").mockImplementation((line: string) => void lines.push(line));
    try {
      expect(() => removePidRecord(dir.path)).not.toThrow();
      expect(() => removeRecordFile(join(dir.path, "run", "mcp", "1-2.json"))).not.toThrow();
      // A record already gone is no news.
      removeRecordFile(join(dir.path, "missing.json"));
    } finally {
      warn.mockRestore();
    }
    expect(lines).toHaveLength(2);
    expect(lines[0]).toContain(`${pidFilePath(dir.path)} could not be removed: a file stands on the path`);
    expect(lines.join("\n")).not.toContain("EFAULT");
  });

  test("a run folder planted as a link to an outside folder: nothing written there, its mode kept", () => {
    using dir = tmpdir();
    const outside = join(dir.path, "outside");
    mkdirSync(outside);
    chmodSync(outside, 0o755);
    const data = join(dir.path, "data");
    mkdirSync(data);
    symlinkSync(outside, join(data, "run"));
    expect(writeMcpRecord(data, { ...child, name: "t" })).toBeNull();
    expect(() => writePidRecord(data, { ...child, port: 1 })).toThrow(
      expect.objectContaining({ code: "ELOOP" }),
    );
    expect(readdirSync(outside)).toEqual([]);
    expect(statSync(outside).mode & 0o777).toBe(0o755);
  });

  test("records are written owner-only under data_dir/run", () => {
    using dir = tmpdir();
    const file = writeMcpRecord(dir.path, { ...child, name: "t" });
    expect(file).toBe(join(dir.path, "run", "mcp", `${process.pid}.${pidSpace()}-${process.pid}.json`));
    expect(statSync(file as string).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir.path, "run", "mcp")).mode & 0o777).toBe(0o700);
  });

  test("an exit seen after its stop removes its own record, never the one a newer start wrote", () => {
    using dir = tmpdir();
    // The record is of this test's own process (a real pid: writing one reads its /proc identity).
    writePidRecord(dir.path, { ...child, port: 1 }, "b");
    const file = pidFilePath(dir.path, process.pid, "b");
    removePidRecord(dir.path, "b", process.pid + 1);
    expect(existsSync(file)).toBe(true);
    removePidRecord(dir.path, "b", process.pid);
    expect(existsSync(file)).toBe(false);
  });
});

// A real full file system (a tmpfs: root on Linux), else skipped and said so.
const disk = smallDisk("1m", "pid records on a full disk");
afterAll(() => disk.dispose());

describe("pid records on a full disk", () => {
  test.skipIf(!disk.mounted)(
    "a rewrite the disk refuses keeps the record it had and leaves no temp file",
    () => {
      const data = join(disk.path, "data");
      const first = writePidRecord(data, { ...child, port: 1 });
      const file = pidFilePath(data);
      const before = readFileSync(file, "utf8");
      expect(first?.port).toBe(1);
      fillDisk(join(disk.path, "filler"));
      expect(() => writePidRecord(data, { ...child, port: 2 })).toThrow(
        expect.objectContaining({ code: "ENOSPC" }),
      );
      expect(readFileSync(file, "utf8")).toBe(before);
      expect(readdirSync(join(data, "run"))).toEqual([`llama-server-${process.pid}.${pidSpace()}.json`]);
    },
  );
});
