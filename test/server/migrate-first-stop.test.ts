import { expect, test } from "bun:test";
import { join } from "node:path";
import type { CoreError } from "../../src/protocol/errors.ts";
import { MigrateFirst } from "../../src/server/migrate-first.ts";
import { ShutdownOrder } from "../../src/server/shutdown-order.ts";
import { threadStopped } from "../../src/store/chunk-thread.ts";
import type { MigratedAhead } from "../../src/store/db/migrate-ahead.ts";
import { olderDatabase, schemaVersion } from "../fixtures/older-database.ts";
import { tmpdir } from "../fixtures/tmpdir.ts";

/** A MigrateFirst over `path` whose threads are `migrate`'s; its shutdown the test's. */
function migrateFirst(path: string, migrate: (dataDir: string) => MigratedAhead) {
  const shutdown = new ShutdownOrder();
  const first = new MigrateFirst({ dataDir: () => path, needless: () => shutdown.begun, shutdown, migrate });
  return { first, shutdown };
}

/** What `open` threw (the test fails when it did not). */
function refusal(open: () => unknown): CoreError {
  try {
    open();
  } catch (err) {
    return err as CoreError;
  }
  throw new Error("the open was not refused");
}

// During the stop `needless` is true, so `wait` starts nothing and the store's open ran on the
// loop: an erase that waits through the stop, on a database from before this version, ran the
// whole migration there (and, failing, again for every next one), holding the stop's bounds. Now
// it is refused as the stop's own ending of the migration is: cancelled, to be sent again.
test("an open during shutdown with a migration pending is refused cancelled, never migrating on the loop", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  let runs = 0;
  const { first, shutdown } = migrateFirst(dir.path, () => {
    runs++;
    return { done: Promise.resolve(undefined), stop: () => {} };
  });
  await shutdown.stop();
  let opens = 0;
  const open = () => opens++;
  const errors = [refusal(() => first.openOnLoop(open)), refusal(() => first.openOnLoop(open))];
  expect({ opens, runs }).toEqual({ opens: 0, runs: 0 });
  for (const err of errors) {
    expect(err.code).toBe("cancelled");
    expect(err.message).toContain("shutting down");
    expect(err.message).toContain("nothing this request asked was done");
  }
  expect(schemaVersion(dir.path)).toBe(6); // as migration 6 left it: nothing run
});

// The thread crashed before the stop, its one try on the loop still owed: taken during the stop,
// a migration of seconds held it past the bounds the host waits. Refused too; a current file opens.
test("during shutdown a crashed thread's owed loop try is refused; a current database still opens", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  const { first, shutdown } = migrateFirst(dir.path, () => ({
    done: Promise.reject(threadStopped(join(dir.path, "local-ai.db"), "it exited")),
    stop: () => {},
  }));
  await first.ready();
  await shutdown.stop();
  let opens = 0;
  expect(refusal(() => first.openOnLoop(() => opens++)).code).toBe("cancelled");
  expect(opens).toBe(0);
  using current = tmpdir();
  const other = migrateFirst(current.path, () => {
    throw new Error("no thread for a current database");
  });
  await other.shutdown.stop();
  expect(other.first.openOnLoop(() => "opened")).toBe("opened");
});

// A worker that cannot be made (the system out of threads, a build missing the worker's file):
// `wait` threw the raw error at every method that needs the store, each answered a generic
// internal_error with a stack in the log, and none could ever use the store. Now it is named,
// and the open takes the one try on the loop a crashed thread's does (docs/agent.md, The store).
test("a migration thread that cannot be started: named, the waiters go on, the store opening on the loop", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  let runs = 0;
  const { first } = migrateFirst(dir.path, () => {
    runs++;
    throw new Error("Worker creation failed");
  });
  await Promise.all([first.ready(), first.ready()]);
  expect(runs).toBe(1);
  expect(first.wait()).toBeUndefined();
  expect(first.openOnLoop(() => "opened")).toBe("opened");
});
