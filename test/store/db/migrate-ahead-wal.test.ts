import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { migrationPending } from "../../../src/store/db/migrate-ahead.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A database whose log was never checkpointed (a core killed at its first start, the schema
// made in its WAL) says version 0 in its header: its migrations ran inline on the main loop,
// ping and cancel waiting, up to the ~4 MB auto-checkpoint's worth of them.
test("a header at 0 with a log that holds something is sent to the thread; an empty log, a link, not", () => {
  using dir = tmpdir();
  const path = join(dir.path, DB_FILE);
  const db = new Database(path, { create: true });
  db.run("PRAGMA journal_mode = WAL");
  db.run("PRAGMA wal_autocheckpoint = 0");
  db.run("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)");
  db.run("PRAGMA user_version = 6");
  expect(migrationPending(dir.path)).toBe(true);
  db.close(false);
  // Closed: checkpointed into the file; the header says 6 (pending as before), so make it 0 again.
  const fresh = new Database(path);
  fresh.run("PRAGMA user_version = 0");
  fresh.close(false);
  writeFileSync(`${path}-wal`, "");
  expect(migrationPending(dir.path)).toBe(false);
  rmSync(`${path}-wal`);
  writeFileSync(join(dir.path, "elsewhere"), "x".repeat(100));
  symlinkSync(join(dir.path, "elsewhere"), `${path}-wal`);
  expect(migrationPending(dir.path)).toBe(false);
});
