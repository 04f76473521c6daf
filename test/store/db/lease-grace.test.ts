import { Database } from "bun:sqlite";
import { describe, expect, jest, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { LEASE_TTL_MS, SessionLeases, TAKEOVER_GRACE_MS } from "../../../src/store/session-lease.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A third process holding the database's lock past the lease's TTL (a long erase) refuses the
// holder's renewals: its lease runs out though its process lives and its turn goes on. Once the
// lock frees, the holder renews at once, and a waiting core takes a run-out lease of a live
// process only after seeing it so for a grace its own polls could write in.

const never = new AbortController().signal;

/**
 * The lease's clocks the test moves: the wall clock (`at`, `expires_at`'s) and the monotonic one
 * (the grace's), which a suspend stops. Each poll of a waiting core reads the wall clock once.
 */
function pollClock(start: number) {
  let polls = 0;
  const waits: { at: number; done: () => void }[] = [];
  const clock = {
    at: start,
    steady: 0,
    now: () => {
      polls++;
      for (const w of waits.filter((w) => polls >= w.at)) w.done();
      return clock.at;
    },
    mono: () => clock.steady,
    /** Time goes by, on both clocks. */
    pass: (ms: number) => {
      clock.at += ms;
      clock.steady += ms;
    },
    /** A system suspend: the wall clock moves on, the monotonic one stands still. */
    suspend: (ms: number) => {
      clock.at += ms;
    },
    /** Resolves after `n` more polls. */
    polls: (n: number) => new Promise<void>((done) => waits.push({ at: polls + n, done })),
  };
  return clock;
}

/**
 * A core (b) waiting for a session whose lease a live holder's row ('holder') names, as another
 * connection (`other`) sees it; closed when disposed.
 */
function waitingCore(dir: string) {
  const clock = pollClock(1_000_000);
  const b = Store.open(dir, { leases: { now: clock.now, mono: clock.mono } });
  const other = new Database(join(dir, DB_FILE));
  other.run("INSERT INTO session_leases VALUES ('u', 's', 'holder', ?, ?)", [
    process.pid,
    clock.at + LEASE_TTL_MS,
  ]);
  const taking = b.lease("u", "s", never, () => undefined);
  const owner = () =>
    (other.query("SELECT owner FROM session_leases").get() as { owner: string } | null)?.owner;
  const polls = (n: number) => Promise.race([clock.polls(n), taking]);
  return {
    clock,
    other,
    owner,
    polls,
    taking,
    /** The lease runs out, its holder alive, seen so by `n` polls. */
    runOut: async (n: number) => {
      await polls(1);
      clock.pass(LEASE_TTL_MS);
      await polls(n);
    },
    /** Frozen now: run out again, and taken once seen so for the grace. */
    takenOnceFrozen: async () => {
      clock.pass(LEASE_TTL_MS);
      await polls(3);
      expect(owner()).toBe("holder");
      clock.pass(TAKEOVER_GRACE_MS);
      (await taking).release();
    },
    [Symbol.dispose]: () => {
      other.close();
      b.close();
    },
  };
}

/**
 * A waiting core sees the lease run out (its holder's renewals refused by a long erase), then the
 * machine sleeps (`suspend`): the session stays the holder's, whose renewal on waking lands within
 * the grace; frozen then, it is still taken once run out and seen so for the grace.
 */
async function keptThroughSuspend(suspend: (clock: ReturnType<typeof pollClock>) => void): Promise<void> {
  using dir = tmpdir();
  using w = waitingCore(dir.path);
  const { clock, other, owner, polls } = w;
  await w.runOut(2);
  suspend(clock);
  await polls(1);
  expect(owner()).toBe("holder");
  other.run("UPDATE session_leases SET expires_at = ?", [clock.at + LEASE_TTL_MS]);
  await polls(2);
  expect(owner()).toBe("holder");
  await w.takenOnceFrozen();
}

/**
 * A frozen holder's lease (run out, its process alive, never renewed) waited for by another core
 * whose every poll after `writable` writable ones finds the lock held, for up to `rounds` rounds:
 * the waiter has it at the end. Each poll reads the clock once, and a poll's worth of time passes.
 */
async function takenOverAmidBusyPolls(writable: number, rounds: number): Promise<void> {
  using dir = tmpdir();
  const clock = pollClock(1_000_000);
  const b = Store.open(dir.path, {
    leases: {
      now: () => {
        clock.pass(50);
        return clock.now();
      },
      mono: clock.mono,
    },
  });
  const other = new Database(join(dir.path, DB_FILE));
  const owner = () =>
    (other.query("SELECT owner FROM session_leases").get() as { owner: string } | null)?.owner;
  other.run("INSERT INTO session_leases VALUES ('u', 's', 'frozen', ?, ?)", [process.pid, clock.at - 1]);
  const taking = b.lease("u", "s", never, () => undefined);
  const polls = (n: number) => Promise.race([clock.polls(n), taking]);
  try {
    for (let i = 0; i < rounds && owner() === "frozen"; i++) {
      await polls(writable);
      other.run("BEGIN IMMEDIATE");
      await polls(1);
      other.run("COMMIT");
    }
    expect(owner()).toBe(b.leases.owner);
    (await taking).release();
  } finally {
    other.close();
    b.close();
  }
}

/** A holder's lease, the wall clock moved by `jump` past the monotonic one: renewed at the next check, not its period's end. */
async function renewedAtOnce(jump: number): Promise<void> {
  using dir = tmpdir();
  Store.open(dir.path).close();
  const db = new Database(join(dir.path, DB_FILE));
  let wall = 1_000_000_000;
  let steady = 0;
  const leases = new SessionLeases(db, { now: () => wall, mono: () => steady });
  const expiresAt = () =>
    (db.query("SELECT expires_at FROM session_leases").get() as { expires_at: number }).expires_at;
  jest.useFakeTimers();
  try {
    const { release } = await leases.acquire("u", "s", never, () => undefined);
    const taken = expiresAt();
    // Time going by on both clocks renews nothing before its period.
    wall += 2000;
    steady += 2000;
    jest.advanceTimersByTime(2000);
    expect(expiresAt()).toBe(taken);
    wall += jump;
    jest.advanceTimersByTime(500);
    expect(expiresAt()).toBe(wall + LEASE_TTL_MS);
    release();
  } finally {
    jest.useRealTimers();
    db.close();
  }
}

describe("a lease's renewal", () => {
  test("is asked without SQLite's busy wait (the main loop's), which is put back after", async () => {
    // Retried every poll while another process holds the lock, each try waited out the
    // connection's 20 ms busy wait on the main loop: 20 ms of every ~70, per lease held.
    using dir = tmpdir();
    const db = new Database(join(dir.path, DB_FILE));
    Store.open(dir.path).close();
    db.run("PRAGMA busy_timeout = 20");
    const waits: number[] = [];
    const query = db.query.bind(db);
    db.query = ((sql: string) => {
      if (sql.startsWith("UPDATE session_leases SET expires_at"))
        waits.push((query("PRAGMA busy_timeout").get() as { timeout: number }).timeout);
      return query(sql);
    }) as typeof db.query;
    let clock = 1_000_000;
    const leases = new SessionLeases(db, { now: () => clock, mono: () => clock });
    jest.useFakeTimers();
    try {
      const { release } = await leases.acquire("u", "s", never, () => undefined);
      clock += 10_000;
      jest.advanceTimersByTime(10_000);
      release();
    } finally {
      jest.useRealTimers();
    }
    expect(waits).toEqual([0]);
    expect((query("PRAGMA busy_timeout").get() as { timeout: number }).timeout).toBe(20);
    db.close();
  });

  test("comes at once when the wall clock jumps past the monotonic one (a system suspend)", async () => {
    // The renewal timer runs on the monotonic clock, which a suspend stops: on waking the lease
    // had run out by the wall clock, and its next renewal was up to 10 s away, far past a waiting
    // core's 1 s grace.
    await renewedAtOnce(60 * 60_000);
  });

  test("comes at once when the wall clock steps back (NTP), or its row reads far ahead to a waiting core", async () => {
    // A waiting core counts a row further ahead than a TTL as run out (the holder cannot have
    // written it on this clock): a live holder renews on the new clock within that core's grace.
    await renewedAtOnce(-60 * 60_000);
  });

  test("of a lease whose database was closed under it is refused, not thrown from its timer", async () => {
    // The store is dropped and closed while a turn holds a lease (the database replaced under the
    // core, services.ts): the busy wait's read, outside the renewal's try, threw from the timer,
    // which the core hears as an uncaught fault and stops on.
    using dir = tmpdir();
    Store.open(dir.path).close();
    const db = new Database(join(dir.path, DB_FILE));
    const leases = new SessionLeases(db);
    jest.useFakeTimers();
    try {
      const { release } = await leases.acquire("u", "s", never, () => undefined);
      db.close();
      expect(() => jest.advanceTimersByTime(10_000)).not.toThrow();
      release();
    } finally {
      jest.useRealTimers();
    }
  });
});

describe("a lease run out while another process held the database's lock", () => {
  test("its holder retries a refused renewal soon after, not a whole renewal period later", async () => {
    using dir = tmpdir();
    let clock = 1_000_000;
    const a = Store.open(dir.path, { leases: { now: () => clock, mono: () => clock } });
    const other = new Database(join(dir.path, DB_FILE));
    const expiresAt = () =>
      (other.query("SELECT expires_at FROM session_leases").get() as { expires_at: number }).expires_at;
    const pass = (ms: number) => {
      clock += ms;
      jest.advanceTimersByTime(ms);
    };
    jest.useFakeTimers();
    try {
      const { release } = await a.lease("u", "s", never, () => undefined);
      other.run("BEGIN IMMEDIATE");
      pass(10_000); // the renewal due now is refused
      other.run("COMMIT");
      const freed = clock;
      pass(200);
      expect(expiresAt()).toBeGreaterThan(freed + LEASE_TTL_MS);
      release();
    } finally {
      jest.useRealTimers();
      other.close();
      a.close();
    }
  });

  test("a waiting core takes it over only after a grace its polls could write in", async () => {
    using dir = tmpdir();
    using w = waitingCore(dir.path);
    const { clock, other, owner, polls } = w;
    await w.runOut(1);
    other.run("BEGIN IMMEDIATE"); // a long erase in a third process
    clock.pass(5 * TAKEOVER_GRACE_MS);
    await polls(3);
    other.run("COMMIT");
    await polls(3);
    expect(owner()).toBe("holder"); // the busy polls did not count toward the grace
    // The holder's retried renewal lands within the grace: the session stays its.
    other.run("UPDATE session_leases SET expires_at = ?", [clock.at + LEASE_TTL_MS]);
    clock.pass(TAKEOVER_GRACE_MS);
    await polls(3);
    expect(owner()).toBe("holder");
    await w.takenOnceFrozen();
  });

  test("a frozen holder is still taken over while a third process's writes now and then make a poll busy", async () => {
    // Every fifth poll finds the lock held by a short write of another core (its indexing, say):
    // 4 writable polls in a row are 200 ms, never the grace, yet 5 s of them go by.
    await takenOverAmidBusyPolls(4, 20);
  });

  test("a frozen holder is taken over though every other poll is busy", async () => {
    // A third process's batches (a folder's indexing leaves the lock free as long as it held
    // it) find every other poll busy: no two writable polls in a row, yet 5 s of them go by.
    await takenOverAmidBusyPolls(1, 50);
  });

  test("a waiting core does not count a system suspend toward the grace: the holder renews on waking", async () => {
    // Both cores on one laptop whose lid is closed while the waiting one sees the lease run out
    // (its holder's renewals refused by a long erase): on the wall clock the whole suspend passed
    // between two of its polls, and it took a live holder's session at its first poll after.
    await keptThroughSuspend((clock) => clock.suspend(60 * 60_000));
  });

  test("a suspend its monotonic clock counted (Windows' QueryPerformanceCounter) is not counted either", async () => {
    // Where performance.now goes on through a suspend, the whole of it lay between two polls of
    // the waiting core, as on the wall clock: taken at its first poll after waking, before the
    // live holder (whose renewals were refused by a long erase) could renew.
    await keptThroughSuspend((clock) => clock.pass(60 * 60_000)); // on both clocks
  });

  test("a wall clock stepped back (NTP): a frozen holder's row, written on the old clock, is taken after the grace", async () => {
    // The row read live for the step and the TTL (an hour here) though its holder was frozen:
    // further ahead than a TTL, it counts as run out, and a live holder renews within the grace.
    using dir = tmpdir();
    using w = waitingCore(dir.path);
    const { clock, other, owner, polls } = w;
    await polls(1);
    clock.at -= 60 * 60_000;
    await polls(3);
    expect(owner()).toBe("holder");
    other.run("UPDATE session_leases SET expires_at = ?", [clock.at + LEASE_TTL_MS]);
    clock.pass(TAKEOVER_GRACE_MS);
    await polls(3);
    expect(owner()).toBe("holder");
    // Frozen now, on the old clock again: its row far ahead once more, taken once seen so for the grace.
    other.run("UPDATE session_leases SET expires_at = ?", [clock.at + 60 * 60_000]);
    await polls(3);
    expect(owner()).toBe("holder");
    clock.pass(TAKEOVER_GRACE_MS);
    await polls(3);
    expect(owner()).not.toBe("holder");
    (await w.taking).release();
  });

  test("a holder whose process is gone is taken over at once", async () => {
    using dir = tmpdir();
    const clock = pollClock(1_000_000);
    const b = Store.open(dir.path, { leases: { now: clock.now, mono: clock.mono, alive: () => false } });
    const other = new Database(join(dir.path, DB_FILE));
    other.run("INSERT INTO session_leases VALUES ('u', 's', 'gone', 1, ?)", [clock.at + LEASE_TTL_MS]);
    const taking = b.lease("u", "s", never, () => undefined);
    try {
      await Promise.race([clock.polls(2), taking]);
      expect(other.query("SELECT owner FROM session_leases").get()).toEqual({ owner: b.leases.owner });
      (await taking).release();
    } finally {
      other.close();
      b.close();
    }
  });
});
