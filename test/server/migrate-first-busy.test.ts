import { describe, expect, spyOn, test } from "bun:test";
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

/** Each run's outcome: an error, done (undefined), or still running (null). */
function migrateFirst(
  dataDir: string,
  outcomes: (Error | undefined | null)[],
  shutdown = new ShutdownOrder(),
) {
  let runs = 0;
  const stopped: number[] = [];
  const migrate = (): MigratedAhead => {
    const run = runs;
    const outcome = outcomes[runs++];
    const done =
      outcome === null
        ? new Promise<undefined>(() => {})
        : outcome
          ? Promise.reject(outcome)
          : Promise.resolve(undefined);
    return { done, stop: () => void stopped.push(run) };
  };
  const first = new MigrateFirst({
    dataDir: () => dataDir,
    needless: () => shutdown.begun,
    shutdown,
    migrate,
  });
  return { first, runs: () => runs, shutdown, stopped };
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

  // Each try added its own stopper to the core's shutdown list, never taken off: a file whose
  // migration kept failing grew that list with every method that asked for the store.
  test("its tries add one stopper to the core's shutdown, which stops the thread running then", async () => {
    using dir = tmpdir();
    olderDatabase(dir.path, 1);
    const shutdown = new ShutdownOrder();
    const added = spyOn(shutdown, "add");
    const m = migrateFirst(dir.path, [busy(), busy(), new Error("disk gone"), busy(), null], shutdown);
    expect(await m.first.ready().catch((e: Error) => e.message)).toBe("disk gone");
    void m.first.ready();
    await Bun.sleep(0);
    expect(m.runs()).toBe(5);
    expect(added).toHaveBeenCalledTimes(1);
    await shutdown.stop();
    expect(m.stopped).toEqual([4]);
  });
});
