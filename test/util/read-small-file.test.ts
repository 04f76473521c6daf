import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileTooLarge, readSmallFileBytes } from "../../src/util/read-file.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function file(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), "read-small-"));
  dirs.push(dir);
  const path = join(dir, "f");
  writeFileSync(path, text);
  return path;
}

describe("readSmallFileBytes", () => {
  test("a small file costs its size, not the cap (a pid record read with 8 MiB at each start)", () => {
    const path = file('{"pid":1}');
    const alloc = spyOn(Buffer, "alloc");
    try {
      expect(readSmallFileBytes(path, 8 * 2 ** 20).toString()).toBe('{"pid":1}');
      const largest = Math.max(0, ...alloc.mock.calls.map((c) => Number(c[0])));
      expect(largest).toBeLessThanOrEqual(64 * 1024);
    } finally {
      alloc.mockRestore();
    }
  });

  test("a file over the cap is refused", () => {
    expect(() => readSmallFileBytes(file("x".repeat(11)), 10)).toThrow(FileTooLarge);
  });

  test("a file at the cap is read whole", () => {
    expect(readSmallFileBytes(file("x".repeat(10)), 10).length).toBe(10);
  });

  // /proc files say 0 bytes by fstat and have more: the read goes on past the fstat's size.
  test.skipIf(process.platform !== "linux")("a regular file that says 0 bytes is still read whole", () => {
    const text = readSmallFileBytes("/proc/self/status", 1 << 20).toString();
    expect(text).toContain("Pid:");
    expect(() => readSmallFileBytes("/proc/self/status", 8)).toThrow(FileTooLarge);
  });
});
