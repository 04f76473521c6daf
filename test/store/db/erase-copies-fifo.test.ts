import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { eraseFromCopies } from "../../../src/store/erase-copies.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A FIFO at a set-aside copy's `-wal` this user cannot write (mode 0444): SQLite's read-write open
// of the log fails with EACCES and it opens it again read-only, blocking on the FIFO (as for the
// live database, store/db/ownership.ts), and the store's thread with it: every delete after it
// never answered (seen here as a non-root user, 2026-12-07: eraseFromCopies never returned). The
// copy is now refused before SQLite opens it, and removed whole as one that cannot be scrubbed.
// Made writable here, so a regression fails the expectation (SQLite's own error) instead of hanging.
describe.skipIf(process.platform === "win32")("a FIFO beside a set-aside database", () => {
  test("at its -wal: the copy is removed whole, never opened by SQLite", () => {
    using dir = tmpdir();
    openStore(dir.path).db.close();
    const copy = join(dir.path, `${DB_FILE}.corrupt-2026-12-01T10-00-00-000Z`);
    copyFileSync(join(dir.path, DB_FILE), copy);
    execFileSync("mkfifo", ["-m", "600", `${copy}-wal`]);
    const [outcome] = eraseFromCopies(dir.path, "u", "s");
    expect(outcome).toMatchObject({ path: copy, outcome: "removed" });
    expect((outcome as { problem?: string }).problem).toContain(`${copy}-wal is not a regular file`);
    expect(existsSync(copy)).toBe(false);
    expect(existsSync(`${copy}-wal`)).toBe(false);
  });
});

// The copy's own name as a FIFO of mode 0444 blocked SQLite's open the same way (read-write
// refused, read-only tried): refused as no regular file before SQLite opens it, then removed.
describe.skipIf(process.platform === "win32")("a FIFO named as a set-aside database", () => {
  test("is removed, never opened by SQLite", () => {
    using dir = tmpdir();
    const copy = join(dir.path, `${DB_FILE}.corrupt-2026-12-01T10-00-00-000Z`);
    execFileSync("mkfifo", ["-m", "600", copy]);
    const [outcome] = eraseFromCopies(dir.path, "u", "s");
    expect(outcome).toMatchObject({ path: copy, outcome: "removed" });
    expect((outcome as { problem?: string }).problem).toContain(`${copy} is not a regular file`);
    expect(existsSync(copy)).toBe(false);
  });
});
