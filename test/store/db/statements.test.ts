import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { readdirSync, readlinkSync } from "node:fs";
import { join } from "node:path";
import { StatementDatabase } from "../../../src/store/db/statements.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

/** The files this process holds open under `dir` (Linux: /proc/self/fd). */
function openUnder(dir: string): string[] {
  const fds = "/proc/self/fd";
  return readdirSync(fds).flatMap((fd) => {
    try {
      const target = readlinkSync(join(fds, fd));
      return target.startsWith(dir) ? [target] : [];
    } catch {
      return [];
    }
  });
}

describe("StatementDatabase (store/db/statements.ts)", () => {
  test("keeps every statement it compiled, where bun:sqlite's own query keeps 20", () => {
    const run = (db: Database) => {
      db.run("CREATE TABLE t (a INTEGER)");
      const first = db.query("SELECT a FROM t WHERE a = 0");
      for (let i = 1; i <= 40; i++) db.query(`SELECT a FROM t WHERE a = ${i}`).all();
      return first === db.query("SELECT a FROM t WHERE a = 0");
    };
    expect(run(new Database(":memory:"))).toBe(false);
    expect(run(new StatementDatabase(":memory:"))).toBe(true);
  });

  test.skipIf(process.platform !== "linux")(
    "a close finalizes them: nothing holds the file open after it",
    () => {
      using dir = tmpdir();
      const path = join(dir.path, "s.db");
      const db = new StatementDatabase(path, { create: true, readwrite: true, strict: true });
      db.run("PRAGMA journal_mode = WAL");
      db.run("CREATE TABLE t (a INTEGER)");
      db.query("INSERT INTO t (a) VALUES (?)").run(1);
      for (let i = 0; i < 30; i++)
        expect(db.query(`SELECT a FROM t WHERE a >= ${i - 1}`).all().length).toBeLessThan(2);
      expect(openUnder(dir.path).length).toBeGreaterThan(0);
      db.close(false);
      expect(openUnder(dir.path)).toEqual([]);
    },
  );

  test.skipIf(process.platform !== "linux")(
    "past the bound the oldest are finalized as they go: a close still leaves nothing open",
    () => {
      using dir = tmpdir();
      const db = new StatementDatabase(join(dir.path, "s.db"), {
        create: true,
        readwrite: true,
        strict: true,
      });
      db.run("CREATE TABLE t (a INTEGER)");
      const held = [];
      for (let i = 0; i < 1030; i++) held.push(db.query(`SELECT a FROM t WHERE a = ${i}`));
      expect(held[1029]?.all()).toEqual([]);
      db.close(false);
      expect(openUnder(dir.path)).toEqual([]);
    },
  );
});
