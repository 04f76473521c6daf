import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { redactEarlierLogs } from "../../src/runtime/log-scrub.ts";
import { writeFileAtomic } from "../../src/store/atomic.ts";
import { fillDisk, smallDisk } from "../fixtures/full-disk.ts";

// A disk with less room than a write needs takes part of it: write(2) answers how much it took
// and throws only at the next call. A file written "whole or not at all" must not be renamed in
// with its first part only. A real tmpfs (root on Linux), else skipped and said so.

const disk = smallDisk("1m", "atomic-full-disk");
const { path: mount, mounted } = disk;
afterAll(() => disk.dispose());

/** A folder on the small disk with `old` at `name`, the disk then left with one page free. */
function nearlyFull(folder: string, name: string, old: string): string {
  const dir = join(mount, folder);
  rmSync(join(mount, "filler"), { force: true });
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, name), old);
  fillDisk(join(mount, "filler"), 4096);
  return dir;
}

describe("a write that the disk takes only part of", () => {
  test.skipIf(!mounted)("writeFileAtomic throws ENOSPC and the target keeps its old content", () => {
    const dir = nearlyFull("atomic", "record.json", "old\n");
    expect(() => writeFileAtomic(join(dir, "record.json"), "x".repeat(20_000))).toThrow(
      expect.objectContaining({ code: "ENOSPC" }),
    );
    expect(readFileSync(join(dir, "record.json"), "utf8")).toBe("old\n");
    expect(readdirSync(dir)).toEqual(["record.json"]);
  });

  test.skipIf(!mounted)("an earlier llama-server log put through the redactor is not cut short", async () => {
    // A reply quoted in the log (log-redact.ts) makes the redactor rewrite the file.
    const log = [
      "--- llama-server started",
      ...Array.from(
        { length: 400 },
        (_, i) => `0.00.000.000 I srv  log_server_r: request: POST /completion 127.0.0.1 200 line ${i}`,
      ),
      "0.01.000.000 W common_chat_peg_parse: unparsed generic output: a private reply",
      "",
    ].join("\n");
    const dir = nearlyFull("logs", "llama-server.log", log);
    await redactEarlierLogs(dir).catch(() => {});
    const after = readFileSync(join(dir, "llama-server.log"), "utf8");
    // Either the old file, or the whole of it redacted: never its first few thousand bytes.
    expect(after).toContain("line 399");
    expect(readdirSync(dir)).toEqual(["llama-server.log"]);
  });
});
