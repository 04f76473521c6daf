import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A FIFO at the database's `-wal` this user cannot write (mode 0444): SQLite's O_RDWR open of the
// log fails with EACCES and SQLite tries again read-only, which blocks on a FIFO with no writer;
// the store's open on the main loop, ping and cancel with it, held for good (seen here as a
// non-root user, 2026-12-07). A FIFO at `-shm` failed as "the disk failed a read or write".
// Both are refused by name before SQLite opens anything, as the `-journal` is (ownership.ts).
// Made writable here, so a regression fails the expectation instead of hanging the suite.
describe.skipIf(process.platform === "win32")("a FIFO beside the database", () => {
  for (const suffix of ["-wal", "-shm"]) {
    test(`at ${suffix}: the store's open refuses it by name`, () => {
      using dir = tmpdir();
      openStore(dir.path).db.close();
      const file = join(dir.path, `${DB_FILE}${suffix}`);
      execFileSync("rm", ["-f", file]);
      execFileSync("mkfifo", ["-m", "600", file]);
      let refused: unknown;
      try {
        openStore(dir.path).db.close();
      } catch (err) {
        refused = err;
      }
      expect(refused).toMatchObject({ code: "internal_error", data: { file, problem: "ENOTFILE" } });
      expect((refused as Error).message).toContain(`${DB_FILE}${suffix} is not a regular file`);
    });
  }
});

// The refusal is for what is no regular file: a hot journal a crash left (rollback mode, an older
// database) is SQLite's to roll back at the open, as before.
test("a regular hot journal is rolled back by the store's open, not refused", () => {
  using dir = tmpdir();
  openStore(dir.path).db.close();
  const path = join(dir.path, DB_FILE);
  using src = tmpdir();
  const from = join(src.path, DB_FILE);
  copyFileSync(path, from);
  const db = new Database(from);
  db.run("PRAGMA journal_mode = DELETE");
  db.run("PRAGMA cache_size = 1");
  db.run("BEGIN");
  db.run("INSERT INTO meta (key, value) VALUES ('crash', hex(zeroblob(200000)))");
  // Mid-transaction: the page spill wrote into the file, the journal holds the pages before it.
  copyFileSync(from, path);
  copyFileSync(`${from}-journal`, `${path}-journal`);
  db.run("ROLLBACK");
  db.close();
  const opened = openStore(dir.path);
  expect(opened.db.query("SELECT count(*) AS n FROM meta WHERE key = 'crash'").get()).toEqual({ n: 0 });
  opened.db.close();
  expect(existsSync(`${path}-journal`)).toBe(false);
});

// The database's own name as a FIFO of mode 0444: SQLite's read-write open was refused (EACCES)
// and its read-only retry blocked with no writer, the main loop with it (seen as a non-root user,
// 2026-12-07); one this user can write read as "the disk failed a read or write".
describe.skipIf(process.platform === "win32")("a FIFO at the database's own name", () => {
  test("the store's open refuses it by name", () => {
    using dir = tmpdir();
    const path = join(dir.path, DB_FILE);
    execFileSync("mkfifo", ["-m", "600", path]);
    expect(() => openStore(dir.path)).toThrow(
      expect.objectContaining({ data: expect.objectContaining({ file: path, problem: "ENOTFILE" }) }),
    );
  });
});
