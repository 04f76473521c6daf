import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, statSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { pidFilePath, removePidRecord, writeMcpRecord, writePidRecord } from "../../src/runtime/pid-file.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const child = { pid: process.pid, binary: "/bin/true", argv: [] as string[] };

describe.skipIf(process.platform !== "linux")("pid records and links", () => {
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
    expect(file).toBe(join(dir.path, "run", "mcp", `${process.pid}-${process.pid}.json`));
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
