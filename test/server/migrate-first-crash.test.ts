import { expect, test } from "bun:test";
import { join } from "node:path";
import { CoreError } from "../../src/protocol/errors.ts";
import { MIGRATION_RETRY_AFTER_MS, MigrateFirst } from "../../src/server/migrate-first.ts";
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

/**
 * A MigrateFirst whose every thread crashes (exits unanswered), app.data_dir read by `dataDir`;
 * or whose threads end as `done` says.
 */
function crashingFirst(
  path: string,
  dataDir: () => string,
  done: () => Promise<undefined> = () =>
    Promise.reject(threadStopped(join(path, "local-ai.db"), "it exited")),
): MigrateFirst {
  const shutdown = new ShutdownOrder();
  return new MigrateFirst({
    dataDir,
    needless: () => shutdown.begun,
    shutdown,
    migrate: () => ({ done: done(), stop: () => {} }),
  });
}

// The one try on the loop after a crash failed (a full disk mid-migration): every next method
// opened the store on the loop again, each blocking ping and cancel for a migration of seconds
// that failed the same way. Now the failure is kept, named, and the next opens refused at once.
test("a crashed thread's one try on the loop that fails: next opens refused at once, named, never run again", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  const first = crashingFirst(dir.path, () => dir.path);
  await first.ready();
  let opens = 0;
  const full = () => {
    opens++;
    throw new CoreError("internal_error", "database or disk is full", { problem: "SQLITE_FULL" });
  };
  const caught = (open: () => unknown) => {
    try {
      open();
    } catch (err) {
      return err as CoreError;
    }
    throw new Error("the open did not fail");
  };
  const one = caught(() => first.openOnLoop(full));
  const two = caught(() => first.openOnLoop(full));
  expect(opens).toBe(1);
  expect(one.code).toBe("internal_error");
  expect(one.data?.problem).toBe("migration_failed");
  expect(one.message).toContain("database or disk is full");
  expect(one.message).toContain("tried again");
  expect(one.message).toContain("nothing this request asked was done");
  expect(two).toBe(one);
  expect(first.wait()).toBeUndefined();
});

test("without a crash, a failed open on the loop is tried again by the next method, as before", () => {
  using dir = tmpdir();
  const first = new MigrateFirst({
    dataDir: () => dir.path,
    needless: () => false,
    shutdown: new ShutdownOrder(),
  });
  let opens = 0;
  const fails = () => {
    opens++;
    throw new Error("locked");
  };
  expect(() => first.openOnLoop(fails)).toThrow("locked");
  expect(() => first.openOnLoop(fails)).toThrow("locked");
  expect(opens).toBe(2);
});

// A users.delete waits through the stop (the user asked for it); shutdown ends the migration's
// thread under it, and the erase was answered internal_error with the thread's own failure
// ("thread_stopped"), which says nothing of whether the erase ran. Now: cancelled, saying so.
test("shutdown ending the migration under a waiting erase: cancelled, saying nothing was done", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  const shutdown = new ShutdownOrder();
  let fail: (err: unknown) => void = () => {};
  const first = new MigrateFirst({
    dataDir: () => dir.path,
    needless: () => shutdown.begun,
    shutdown,
    migrate: () => ({
      done: new Promise((_, reject) => {
        fail = reject;
      }),
      stop: () => fail(threadStopped(join(dir.path, "local-ai.db"), "it was stopped")),
    }),
  });
  const erase = first.ready().then(
    () => undefined,
    (err: CoreError) => err,
  );
  await shutdown.stop();
  const err = await erase;
  expect(err?.code).toBe("cancelled");
  expect(err?.message).toContain("nothing this request asked was done");
});

// The one try on the loop failed on something that passes (another core's lock, a disk since
// freed): every open was refused until the user restarted the core, a host's chats and erases
// failing for good. Now the refusal lasts a cool-down (no freeze a request), then the migration
// is tried again on its thread, off the loop.
/**
 * A MigrateFirst whose first thread crashes and whose next ones migrate, its cool-down's clock
 * the test's; its one try on the loop already failed ("database is locked").
 */
async function failedLoopTry(path: string) {
  const shutdown = new ShutdownOrder();
  const state = { clock: 1_000, runs: 0 };
  const first = new MigrateFirst({
    dataDir: () => path,
    needless: () => shutdown.begun,
    shutdown,
    now: () => state.clock,
    migrate: () => {
      state.runs++;
      if (state.runs > 1) return { done: Promise.resolve(undefined), stop: () => {} };
      return {
        done: Promise.reject(threadStopped(join(path, "local-ai.db"), "it exited")),
        stop: () => {},
      };
    },
  });
  await first.ready();
  const busy = () => {
    throw new CoreError("internal_error", "database is locked", { problem: "SQLITE_BUSY" });
  };
  expect(() => first.openOnLoop(busy)).toThrow("database is locked");
  return { first, state };
}

test("a crashed thread's failed loop try is refused only for a cool-down, then tried again on a thread", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  const { first, state } = await failedLoopTry(dir.path);
  expect(first.wait()).toBeUndefined();
  expect(() => first.openOnLoop(() => "opened")).toThrow("database is locked");
  state.clock += MIGRATION_RETRY_AFTER_MS;
  // Past the cool-down the next method waits on a new thread, not on this loop.
  await first.ready();
  expect(state.runs).toBe(2);
  expect(first.openOnLoop(() => "opened")).toBe("opened");
});

// The one try's catch read app.data_dir again to word the failure: the config gone meanwhile,
// that read threw, its error replaced the failure, nothing was kept, and the next method ran the
// migration on the loop again, blocking ping and cancel once more. What it needs is read first.
test("a crashed thread's failed loop try is kept even when the config is gone by then", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  let configGone = false;
  const first = crashingFirst(dir.path, () => {
    if (configGone) throw new CoreError("config_invalid", "no config");
    return dir.path;
  });
  await first.ready();
  let opens = 0;
  const full = () => {
    opens++;
    configGone = true;
    throw new CoreError("internal_error", "database or disk is full", { problem: "SQLITE_FULL" });
  };
  const errors: CoreError[] = [];
  for (let i = 0; i < 2; i++) {
    try {
      first.openOnLoop(full);
    } catch (err) {
      errors.push(err as CoreError);
    }
  }
  expect(opens).toBe(1);
  expect(errors[0]?.data?.problem).toBe("migration_failed");
  expect(errors[0]?.message).toContain(dir.path);
  expect(errors[1]).toBe(errors[0]);
});

// Past the cool-down, an open that did not wait (memory's embedder, prompt reuse's store: sync
// callers of services.ts store()) took the one try on the loop: a big database's migration
// held ping and cancel there, where a method's wait would have started a thread. Now that open
// starts the thread and is refused "migrating", as any open is while the thread runs.
test("past the cool-down, an open without a wait starts the thread and is refused, never migrating on the loop", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  const { first, state } = await failedLoopTry(dir.path);
  state.clock += MIGRATION_RETRY_AFTER_MS;
  let opens = 0;
  let refused: CoreError | undefined;
  try {
    first.openOnLoop(() => opens++);
  } catch (err) {
    refused = err as CoreError;
  }
  expect(opens).toBe(0);
  expect(refused?.data?.problem).toBe("migrating");
  expect(state.runs).toBe(2);
  await first.running;
  expect(first.openOnLoop(() => "opened")).toBe("opened");
});

// A thread that failed without crashing (a full disk, another core's lock past the busy wait):
// the next method that waits starts another, but a synchronous open (memory's embedder, prompt
// reuse asking whether a session is still there) ran the pending migration on the loop, holding
// ping and cancel for seconds of a big database. It starts the thread and is refused `migrating`.
test("after a thread's failure, a sync open starts the next thread and is refused, never migrating on the loop", async () => {
  using dir = tmpdir();
  olderDatabase(dir.path, 1);
  const full = new CoreError("internal_error", "database or disk is full", { problem: "SQLITE_FULL" });
  const runs: number[] = [];
  const first = crashingFirst(
    dir.path,
    () => dir.path,
    () => {
      runs.push(runs.length);
      return runs.length > 1 ? Promise.resolve(undefined) : Promise.reject(full);
    },
  );
  await expect(first.ready()).rejects.toThrow("database or disk is full");
  let opens = 0;
  const open = () => {
    opens++;
    return "opened";
  };
  let refused: CoreError | undefined;
  try {
    first.openOnLoop(open);
  } catch (err) {
    refused = err as CoreError;
  }
  expect({ opens, runs: runs.length, problem: refused?.data?.problem }).toEqual({
    opens: 0,
    runs: 2,
    problem: "migrating",
  });
  await first.ready();
  expect(first.openOnLoop(open)).toBe("opened");
});
