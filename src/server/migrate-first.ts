import { CoreError, cancelledError } from "../protocol/errors.ts";
import type { FileStamp } from "../store/db/file-stamp.ts";
import type { MigratedAhead } from "../store/db/migrate-ahead.ts";
import { migratingError } from "../store/db/migrating-error.ts";
import { logger } from "../util/logger.ts";
import type { ShutdownOrder } from "./shutdown-order.ts";

type Reset = { aside: string; problem: string };

export interface MigrateFirstDeps {
  /** app.data_dir; throws when there is no config (the store's open reports it). */
  dataDir(): string;
  /** The store is open already, or the core is stopping: nothing to run. */
  needless(): boolean;
  shutdown: ShutdownOrder;
  /** Tests: the thread's run (default store/db/migrate-ahead.ts `migrateAhead`). */
  migrate?: (dataDir: string) => MigratedAhead;
  /** Tests: the clock the cool-down after a failed loop try is read on (default monotonic: a wall clock set back held the refusal). */
  now?: () => number;
}

/**
 * How long a method waits out another core's migration of the same file (two app windows after
 * an upgrade): the thread's open gives up on the lock after 3 s (open.ts OPEN_BUSY_WAIT_MS), a
 * large database's migration takes longer, and waiting blocks only the thread.
 */
export const MIGRATION_BUSY_WAIT_MS = 120_000;

/**
 * How long a failed try on the loop (after a crashed thread) is answered at once before the
 * migration is tried again on a thread: its cause often passes (another core's lock, a disk
 * since freed), and a host should not need a restart, nor a freeze a request meanwhile.
 */
export const MIGRATION_RETRY_AFTER_MS = 30_000;

const problemOf = (err: unknown) => (err instanceof CoreError ? String(err.data?.problem ?? "") : "");
const busy = (err: unknown) => problemOf(err).startsWith("SQLITE_BUSY");
/** store/chunk-thread.ts `threadStopped`'s: not imported, so a current database loads no thread code. */
const crashed = (err: unknown) => problemOf(err) === "thread_stopped";

/**
 * A database from before this version's schema has its migrations run on a thread of their own
 * (store/db/migrate-ahead.ts) before the store opens on this loop, so ping, cancel and status
 * answer meanwhile (docs/agent.md, The store, "Migrations off the loop"), as does FTS5 work a
 * current schema owes. A current one costs a header read and a read-only look at its meta (~4 ms)
 * and starts no thread.
 */
export class MigrateFirst {
  /** Set while the thread runs; the methods that may use the store wait on it. */
  running: Promise<void> | undefined;
  private reset: Reset | undefined;
  /** The file as the thread's `quick_check` passed it (open.ts `checkedAhead`). */
  private checked: FileStamp | undefined;
  /**
   * The thread found the schema current, until the store opens on the loop: the header may lag a
   * WAL another core holds open, and a second, needless thread begun in that gap (a chat importing
   * its turn's modules) had the chat's store() refused "migrating". Set too when the thread
   * crashed: the store's open on the loop runs the migration then.
   */
  private current = false;
  /** The thread running now; one stopper in the core's shutdown stops it, whichever try it is. */
  private thread: MigratedAhead | undefined;
  private stopperAdded = false;
  /** The thread crashed: the store's next open, on this loop, is the one try left (`openOnLoop`). */
  private loopTryOwed = false;
  /** That try failed: every next open is refused with it, at once (`openOnLoop`). */
  private loopFailed: CoreError | undefined;
  /** When `loopFailed` was kept: after MIGRATION_RETRY_AFTER_MS it is tried again. */
  private loopFailedAt = 0;

  constructor(private readonly deps: MigrateFirstDeps) {}

  /** Resolves once the store can open with no migration on this loop; rejects with the thread's open's error. */
  ready(): Promise<void> {
    return this.wait() ?? Promise.resolve();
  }

  /**
   * The migration to wait for, begun now if one is pending; undefined when there is none (the
   * store open, a current database, no config: the store's open reports that).
   */
  wait(): Promise<void> | undefined {
    if (this.running) return this.running;
    // The cool-down after a failed loop try is over: the migration runs on a thread again.
    if (this.loopFailed && this.cooled()) {
      this.loopFailed = undefined;
      this.current = false;
    }
    if (this.current || this.deps.needless()) return undefined;
    const dataDir = this.dataDirNow();
    if (dataDir === undefined) return undefined;
    const { migrationPending, migrateAhead } =
      require("../store/db/migrate-ahead.ts") as typeof import("../store/db/migrate-ahead.ts");
    if (!migrationPending(dataDir)) return undefined;
    const deadline = Date.now() + MIGRATION_BUSY_WAIT_MS;
    const run = (): Promise<void> => {
      const ahead = started(() => (this.deps.migrate ?? migrateAhead)(dataDir), dataDir);
      this.thread = ahead;
      this.addStopper();
      const ended = ahead.done.finally(() => {
        if (this.thread === ahead) this.thread = undefined;
      });
      return ended.then(
        (opened) => {
          this.reset = opened?.reset;
          this.checked = opened?.checked;
          this.current = true;
          this.running = undefined;
        },
        (err: unknown) => {
          // Another core's migration holds the lock: tried again, the method still waiting.
          if (busy(err) && !this.deps.needless() && Date.now() < deadline) return run();
          // The thread crashed or exited unanswered: the open is tried once on this loop, as
          // before there was a thread (its migration blocks the loop that once), rather than
          // every waiter (a users.delete among them) failed and each next method crashing another.
          // Once: `openOnLoop` keeps a failure, so no method after it blocks the loop again.
          if (crashed(err) && !this.deps.needless()) {
            logger.warn(
              `the store's migration thread stopped; migrating on the main loop: ${(err as Error).message}`,
            );
            this.current = true;
            this.loopTryOwed = true;
            this.running = undefined;
            return;
          }
          // The next method that needs the store tries again, as a failed open on this loop is.
          this.running = undefined;
          // Shutdown ended the thread: a waiter (an erase, which waits through the stop) is told
          // the core stopped, as any request a stop ends is, never the thread's internal failure.
          if (crashed(err) && this.deps.shutdown.begun) throw stoppedBeforeStore();
          throw err;
        },
      );
    };
    const done = run();
    this.running = done;
    return done;
  }

  /**
   * Shutdown ends the thread rather than wait seconds: SQLite rolls back what it had not
   * committed. Added once: a stopper a try, never taken off, grew the core's shutdown list with
   * every method that asked for a store whose migration kept failing.
   */
  private addStopper(): void {
    if (this.stopperAdded) return;
    this.stopperAdded = true;
    this.deps.shutdown.add("store migration", this, async () => this.thread?.stop(), { beside: true });
  }

  /**
   * The store's open on this loop (services.ts `store`). After the thread crashed, it is tried
   * once: a failure then (a full disk mid-migration) is kept and every next open refused with it
   * at once, named (`data.problem` `migration_failed`), rather than each method blocking ping and
   * cancel for another migration of seconds that may fail the same way; after a cool-down
   * (MIGRATION_RETRY_AFTER_MS) the next method tries again, on a thread. An open that did not
   * wait (a sync one) with a migration pending starts that thread and is refused `migrating`
   * (docs/agent.md, The store, "Migrations off the loop").
   */
  openOnLoop<T>(open: () => T): T {
    if (this.loopFailed && !this.cooled()) throw this.loopFailed;
    // Reached without `wait` (a sync open: memory's embedder, prompt reuse's store) with a
    // migration pending (past the cool-down, or after a thread's failure that was no crash): it
    // goes to its thread and this open is refused as any is meanwhile. Run here, it held ping
    // and cancel for a big database's migration. After a crash (`loopTryOwed`) none is begun.
    const begun = this.wait();
    if (begun) {
      begun.catch(() => {}); // its failure is told to the next method that waits
      throw migratingError(this.deps.dataDir());
    }
    // Shutdown begun, `wait` starts no thread: an open now (an erase waits through the stop) ran
    // the migration here, holding the stop's bounds, again for each next open if it failed.
    if (this.deps.shutdown.begun && (this.loopTryOwed || (!this.current && this.pendingNow())))
      throw stoppedBeforeStore();
    if (!this.loopTryOwed) return open();
    this.loopTryOwed = false;
    // Read before: the config gone by the catch, a read there threw, its error replaced the
    // failure and nothing was kept, so the next method ran the migration on the loop again.
    const dataDir = this.dataDirNow();
    try {
      return open();
    } catch (err) {
      this.loopFailed = migrationFailed(dataDir, err);
      this.loopFailedAt = this.now();
      throw this.loopFailed;
    }
  }

  /** app.data_dir, or undefined with no config (the failure is worded without it). */
  private dataDirNow(): string | undefined {
    try {
      return this.deps.dataDir();
    } catch {
      return undefined;
    }
  }

  /** A migration is pending in app.data_dir (false with no config: the store's open reports it). */
  private pendingNow(): boolean {
    const dataDir = this.dataDirNow();
    if (dataDir === undefined) return false;
    const { migrationPending } =
      require("../store/db/migrate-ahead.ts") as typeof import("../store/db/migrate-ahead.ts");
    return migrationPending(dataDir);
  }

  private now(): number {
    return (this.deps.now ?? (() => performance.now()))();
  }

  private cooled(): boolean {
    return this.now() - this.loopFailedAt >= MIGRATION_RETRY_AFTER_MS;
  }

  /** The store opened on the loop, handed the reset: a file replaced under it later is read again (services.ts `needless`). */
  opened(): void {
    this.current = false;
    this.reset = undefined;
    this.checked = undefined;
  }

  /** The file as the thread's open checked it whole, for the store opened after it: not read whole twice. */
  checkedAhead(): FileStamp | undefined {
    return this.checked;
  }

  /**
   * The reset the thread made (a damaged file set aside), for the store opened after it: kept
   * until one opens (`opened`), so an open that fails first does not lose the host's warning.
   */
  resetMade(): Reset | undefined {
    return this.reset;
  }
}

/**
 * The thread's start; one that throws (no worker could be made) fails as a crashed thread does
 * (`thread_stopped`), so the open takes its one try on the loop rather than every method that
 * needs the store hearing the raw error, a generic internal_error, each time.
 */
function started(start: () => MigratedAhead, dataDir: string): MigratedAhead {
  try {
    return start();
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    const named =
      err instanceof CoreError
        ? err
        : new CoreError(
            "internal_error",
            `the store's migration thread for ${dataDir} could not be started (${why}); send it again`,
            { key: "app.data_dir", problem: "thread_stopped" },
          );
    return { done: Promise.reject(named), stop: () => {} };
  }
}

/** The one try on the loop after a crashed thread failed: named, and what to do about it. */
function migrationFailed(dataDir: string | undefined, err: unknown): CoreError {
  const why = err instanceof Error ? err.message : String(err);
  return new CoreError(
    "internal_error",
    `the database${dataDir === undefined ? "" : ` in ${dataDir}`} could not be brought up to date for this version (${why}), and nothing this request asked was done; it is tried again in ${MIGRATION_RETRY_AFTER_MS / 1000} s, or at the core's next start`,
    { key: "app.data_dir", problem: "migration_failed", cause: problemOf(err) || undefined },
  );
}

/** What a method waiting on the migration hears when shutdown ends it (docs/protocol.md, cancelled). */
function stoppedBeforeStore(): CoreError {
  return cancelledError(
    "the core is shutting down: the database was still being brought up to date, and nothing this request asked was done; send it again after the next start",
  );
}
