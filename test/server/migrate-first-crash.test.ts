import { expect, test } from "bun:test";
import { join } from "node:path";
import { MigrateFirst } from "../../src/server/migrate-first.ts";
import { ShutdownOrder } from "../../src/server/shutdown-order.ts";
import { threadStopped } from "../../src/store/chunk-thread.ts";
import { SCHEMA_VERSION } from "../../src/store/db/migrations.ts";
import { openStore } from "../../src/store/db/open.ts";
import { olderDatabase, schemaVersion } from "../fixtures/older-database.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

// The store's thread crashed (or exited unanswered) mid-migration: every method waiting on it
// (chat, sessions.*, documents.*, users.delete) failed, and each next one started a thread that
// could crash the same way, so a user's erase never ran. Now the open is tried once on the loop.
test("a migration thread that crashes: the waiters go on, the store opening (and migrating) on the loop", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  let runs = 0;
  const shutdown = new ShutdownOrder();
  const first = new MigrateFirst({
    dataDir: () => dir.path,
    needless: () => shutdown.begun,
    shutdown,
    migrate: () => {
      runs++;
      return {
        done: Promise.reject(threadStopped(join(dir.path, "local-ai.db"), "it exited")),
        stop: () => {},
      };
    },
  });
  // Two waiters (a sessions.list and a users.delete): both go on, neither fails.
  await Promise.all([first.ready(), first.ready()]);
  expect(runs).toBe(1);
  // No second thread: the store's open (services.ts store()) runs the migration here.
  expect(first.wait()).toBeUndefined();
  openStore(dir.path).db.close();
  expect(schemaVersion(dir.path)).toBe(SCHEMA_VERSION);
});
