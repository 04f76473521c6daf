import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { migrationPending } from "../../../src/store/db/migrate-ahead.ts";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

const meta = (dataDir: string, sql: string) => {
  const db = new Database(join(dataDir, DB_FILE));
  db.run(sql);
  db.close();
};

// A database at the latest schema can still owe the messages index's one-time check (or an
// index rebuild for this SQLite's FTS5): that ran inline at the main loop's open, ~50 ms a
// 100,000 messages, ~1 s if it rebuilds (docs/agent.md, The store, "Migrations off the loop").
describe("a current schema owing FTS work is pending", () => {
  test("lacking fts_roles_checked: pending until the thread's open writes it", () => {
    using dir = tmpdir();
    openStore(dir.path).db.close();
    meta(dir.path, "DELETE FROM meta WHERE key = 'fts_roles_checked'");
    expect(migrationPending(dir.path)).toBe(true);
    // What the thread runs (chunk-worker.ts openAhead): the same openStore.
    openStore(dir.path).db.close();
    expect(migrationPending(dir.path)).toBe(false);
  });

  test("meta.fts unlike this SQLite's FTS5: pending", () => {
    using dir = tmpdir();
    openStore(dir.path, { withoutFts: true }).db.close();
    expect(migrationPending(dir.path, { withoutFts: true })).toBe(false);
    expect(migrationPending(dir.path)).toBe(true);
    openStore(dir.path).db.close();
    expect(migrationPending(dir.path)).toBe(false);
    expect(migrationPending(dir.path, { withoutFts: true })).toBe(true);
  });

  test("a fully current one is not pending", () => {
    using dir = tmpdir();
    openStore(dir.path).db.close();
    expect(migrationPending(dir.path)).toBe(false);
  });

  test("a file the read-only open cannot read is not pending (the main loop's open handles it)", () => {
    using dir = tmpdir();
    openStore(dir.path).db.close();
    const path = join(dir.path, DB_FILE);
    // The latest schema's header over pages that are not a database.
    const header = readFileSync(path).subarray(0, 100);
    writeFileSync(path, Buffer.concat([header, Buffer.alloc(8192, 7)]));
    expect(migrationPending(dir.path)).toBe(false);
    // A current one with no meta table at all (another program's, at the same user_version).
    writeFileSync(path, "");
    const db = new Database(path);
    db.run("CREATE TABLE other (x)");
    db.run(`PRAGMA user_version = ${header.readUInt32BE(60)}`);
    db.close();
    expect(migrationPending(dir.path)).toBe(false);
  });

  test("a link at its log or shared memory: not pending, its target left alone", () => {
    for (const name of [`${DB_FILE}-wal`, `${DB_FILE}-shm`]) {
      using dir = tmpdir();
      openStore(dir.path).db.close();
      meta(dir.path, "DELETE FROM meta WHERE key = 'fts_roles_checked'");
      const target = join(dir.path, "elsewhere");
      symlinkSync(target, join(dir.path, name));
      // The main loop's open refuses the link by name (ownership.ts claimDatabaseFile).
      expect(migrationPending(dir.path)).toBe(false);
      expect(existsSync(target)).toBe(false);
    }
  });
});
