import { describe, expect, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigSchema } from "../../src/config/schema.ts";
import { storeCheck, verdictCheck } from "../../src/doctor/store-check.ts";
import { DB_FILE, openStore } from "../../src/store/db/open.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

const configAt = (dataDir: string) => ConfigSchema.parse({ app: { data_dir: dataDir } });

// SQLite's first read opens an existing `-journal` read-only and blocking, looking for a hot
// journal: with a FIFO there doctor's read-only open waited its whole limit (60 s), then said only
// "took longer", its thread left blocked for good; the core refuses it by name (ownership.ts).
describe.skipIf(process.platform === "win32")("doctor: a FIFO at the database's -journal", () => {
  test("named at once as the problem, the file not opened", async () => {
    using dir = tmpdir();
    openStore(dir.path).db.close();
    execFileSync("mkfifo", [join(dir.path, `${DB_FILE}-journal`)]);
    const c = await storeCheck(configAt(dir.path), true, { limitMs: 1000 });
    expect(c).toMatchObject({ id: "store", status: "fail", data: { problem: "a FIFO" } });
    expect(c.message).toContain(`${DB_FILE}-journal`);
  });
});

// A core killed mid-write on a rollback journal (before WAL took over, at a first open) leaves a
// hot journal; doctor's read-only open cannot roll it back and said the database "cannot be
// read", telling the user to check permissions or move the file aside, their conversations with it.
test("a leftover rollback journal is named as such, not as an unreadable database", async () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  // A process killed with its transaction's pages spilled into the file: the journal is hot.
  const killed = `const { Database } = require("bun:sqlite");
    const db = new Database(${JSON.stringify(path)}, { create: true });
    db.run("PRAGMA journal_mode=DELETE"); db.run("CREATE TABLE t(x)"); db.run("PRAGMA cache_size=1");
    db.run("BEGIN"); for (let i = 0; i < 50; i++) db.run("INSERT INTO t VALUES (randomblob(1000))");
    process.kill(process.pid, "SIGKILL");`;
  Bun.spawnSync([process.execPath, "-e", killed]);
  expect(statSync(`${path}-journal`).size).toBeGreaterThan(0);
  const c = await storeCheck(configAt(dir.path), true, { limitMs: 5000 });
  expect(c).toMatchObject({ id: "store", status: "warn", data: { journal: `${path}-journal` } });
  expect(c.message).toContain("rollback journal");
  expect(c.message).not.toContain("cannot be read");
});

// The journal was told from other failures by SQLite's wording ("readonly"/"read-only") alone:
// a path holding those words (a thread's stop names the path) read as a journal to roll back, and
// a SQLite whose wording differs read a hot journal as "cannot be read". Its code decides now.
describe("a leftover journal is told by SQLite's code", () => {
  const hotJournal = (dir: string) => {
    const path = join(dir, DB_FILE);
    writeFileSync(path, "x");
    writeFileSync(`${path}-journal`, "x");
    return path;
  };

  test("SQLITE_READONLY_ROLLBACK is the journal whatever the message says", () => {
    using dir = tmpdir();
    const path = hotJournal(dir.path);
    const verdict = {
      kind: "unreadable" as const,
      message: "écriture refusée",
      code: "SQLITE_READONLY_ROLLBACK",
    };
    expect(verdictCheck(verdict, path, "ok", "FTS5 search", {})).toMatchObject({ status: "warn" });
  });

  test("another code is no journal even with 'read-only' in the message", () => {
    using dir = tmpdir();
    const path = hotJournal(join(dir.path));
    const message = `the store's thread for /media/read-only/${DB_FILE} stopped (it crashed) before it answered`;
    const verdict = { kind: "unreadable" as const, message, code: "internal_error" };
    const c = verdictCheck(verdict, path, "ok", "FTS5 search", {});
    expect(c).toMatchObject({ status: "fail" });
    expect(c.message).toContain("cannot be read");
  });

  test("no code: the message still decides", () => {
    using dir = tmpdir();
    const path = hotJournal(dir.path);
    const verdict = { kind: "unreadable" as const, message: "attempt to write a readonly database" };
    expect(verdictCheck(verdict, path, "ok", "FTS5 search", {})).toMatchObject({ status: "warn" });
  });
});
