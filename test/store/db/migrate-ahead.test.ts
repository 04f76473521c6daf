import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { migrateAhead, migrationPending } from "../../../src/store/db/migrate-ahead.ts";
import { SCHEMA_VERSION } from "../../../src/store/db/migrations.ts";
import { DB_FILE, openStore } from "../../../src/store/db/open.ts";
import { olderDatabase, schemaVersion as version } from "../../fixtures/older-database.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A first open after an upgrade ran migration 7 inside the synchronous Store.open: ~8 s at 400k
// messages with ping and cancel unanswered (docs/agent.md, The store, "Migrations off the loop").
describe("a pending migration runs on a thread", () => {
  test("the main loop turns while it runs (inline, it turned only after)", async () => {
    using dir = tmpdir();
    olderDatabase(dir.path, 300);
    expect(migrationPending(dir.path)).toBe(true);
    const order: string[] = [];
    setImmediate(() => order.push("loop turned"));
    const ahead = migrateAhead(dir.path);
    const done = await ahead.done.then((value) => {
      order.push("migrated");
      return value;
    });
    expect(order).toEqual(["loop turned", "migrated"]);
    expect(version(dir.path)).toBe(SCHEMA_VERSION);
    expect(migrationPending(dir.path)).toBe(false);
    // The main loop's open then finds the schema current and writes nothing, nor reads the
    // file whole again: the thread's quick_check passed this very file.
    const opened = openStore(dir.path, { checkedAhead: done?.checked });
    expect(done?.checked).toBeDefined();
    expect(opened.checked).toBe(false);
    expect(opened.db.query("SELECT count(*) AS n FROM messages WHERE by_core = 0").get()).toEqual({ n: 300 });
    opened.db.close();
  });

  test("a current, missing, empty or foreign database needs no thread", () => {
    using dir = tmpdir();
    expect(migrationPending(dir.path)).toBe(false);
    writeFileSync(join(dir.path, DB_FILE), "");
    expect(migrationPending(dir.path)).toBe(false);
    writeFileSync(join(dir.path, DB_FILE), Buffer.alloc(4096, 7));
    expect(migrationPending(dir.path)).toBe(false);
    openStore(dir.path, {}).db.close();
    expect(version(dir.path)).toBe(SCHEMA_VERSION);
    expect(migrationPending(dir.path)).toBe(false);
  });

  test("a migration that fails on the thread rejects with the open's error", async () => {
    using dir = tmpdir();
    olderDatabase(dir.path, 10);
    // Migration 7 adds by_core: a column already there fails it, as it would on the main loop.
    const db = new Database(join(dir.path, DB_FILE));
    db.run("ALTER TABLE messages ADD COLUMN by_core INTEGER");
    db.close();
    let inline: unknown;
    try {
      openStore(dir.path).db.close();
    } catch (err) {
      inline = err;
    }
    const ahead = await migrateAhead(dir.path).done.catch((err: unknown) => err);
    expect(inline).toBeInstanceOf(Error);
    expect((ahead as Error).message).toBe((inline as Error).message);
    expect(version(dir.path)).toBe(6);
  });
});
