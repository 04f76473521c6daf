import { describe, expect, test } from "bun:test";
import { CoreError } from "../../src/protocol/errors.ts";
import { MigrateFirst } from "../../src/server/migrate-first.ts";
import { ShutdownOrder } from "../../src/server/shutdown-order.ts";
import type { MigratedAhead } from "../../src/store/db/migrate-ahead.ts";
import { olderDatabase } from "../fixtures/older-database.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** As the thread's open fails when another core's migration holds the write lock past its 3 s wait (open.ts storeError). */
const busy = () =>
  new CoreError("internal_error", "another process holds the database locked; try again", {
    key: "app.data_dir",
    problem: "SQLITE_BUSY",
  });

function migrateFirst(dataDir: string, outcomes: (Error | undefined)[], shutdown = new ShutdownOrder()) {
  let runs = 0;
  const migrate = (): MigratedAhead => {
    const outcome = outcomes[runs++];
    return { done: outcome ? Promise.reject(outcome) : Promise.resolve(undefined), stop: () => {} };
  };
  const first = new MigrateFirst({
    dataDir: () => dataDir,
    needless: () => shutdown.begun,
    shutdown,
    migrate,
  });
  return { first, runs: () => runs, shutdown };
}

// Two app windows started after an upgrade: the second core's thread met the first's migration
// (seconds at a large database) holding the write lock, and its sessions.list or chat was
// answered internal_error SQLITE_BUSY though the host had done nothing wrong.
describe("a migration another core is running", () => {
  test("is waited out: the thread's open is tried again while the lock is busy", async () => {
    using dir = tmpdir();
    olderDatabase(dir.path, 1);
    const m = migrateFirst(dir.path, [busy(), busy(), undefined]);
    await m.first.ready();
    expect(m.runs()).toBe(3);
    expect(m.first.wait()).toBeUndefined();
  });

  test("any other failure is the method's, and the core's stop ends the retries", async () => {
    using dir = tmpdir();
    olderDatabase(dir.path, 1);
    const other = migrateFirst(dir.path, [new Error("disk gone")]);
    expect(await other.first.ready().catch((e: Error) => e.message)).toBe("disk gone");
    const stopping = migrateFirst(dir.path, [busy(), undefined]);
    const ready = stopping.first.ready().catch((e: CoreError) => e.data?.problem);
    await stopping.shutdown.stop();
    expect(await ready).toBe("SQLITE_BUSY");
    expect(stopping.runs()).toBe(1);
  });
});
