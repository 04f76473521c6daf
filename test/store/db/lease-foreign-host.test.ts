import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { LEASE_TTL_MS, TAKEOVER_GRACE_MS } from "../../../src/store/session-lease.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Two containers (or two machines, a network folder) on one data folder: a holder's pid is of a
// pid space this core cannot see, so "no such process here" says nothing of it. Its lease was
// taken at once, two cores writing one session's turn. A holder whose owner names another pid
// space is waited out to its lease's end and the grace, as a frozen one is (docs/agent.md,
// "Two cores on one data folder").

const never = new AbortController().signal;

test("a lease held in another pid space is not taken at once, only once it stood still for a TTL", async () => {
  using dir = tmpdir();
  let at = 1_000_000;
  let steady = 0;
  let mono = () => steady;
  const b = Store.open(dir.path, {
    leases: { now: () => at, mono: () => mono(), alive: () => false, space: "here" },
  });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    // The same pid as ours is common there: each container's core is often pid 1.
    other.run("INSERT INTO session_leases VALUES ('u', 's', ?, ?, ?)", [
      `1:abcdef@there`,
      1,
      at + LEASE_TTL_MS,
    ]);
    expect(await b.tryLease("u", "s", never, () => "taken")).toBeUndefined();
    // Run out, unchanged for a TTL on our clock (store/lease-sightings.ts): taken once seen so
    // for the grace, each poll a good part of it later.
    at += LEASE_TTL_MS + 1;
    steady += LEASE_TTL_MS;
    let polls = 0;
    mono = () => {
      polls++;
      steady += TAKEOVER_GRACE_MS / 3;
      return steady;
    };
    const lease = await b.tryLease("u", "s", never, () => "taken");
    expect([lease?.value, polls > 2]).toEqual(["taken", true]);
    lease?.release();
  } finally {
    other.close();
    b.close();
  }
});

test("a lease of this pid space whose process is gone is taken at once, as before", async () => {
  using dir = tmpdir();
  const b = Store.open(dir.path, { leases: { alive: () => false, space: "here" } });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    for (const owner of ["1:abcdef@here", "1:abcdef"]) {
      other.run("INSERT OR REPLACE INTO session_leases VALUES ('u', 's', ?, 1, ?)", [
        owner,
        Date.now() + LEASE_TTL_MS,
      ]);
      const lease = await b.tryLease("u", "s", never, () => "taken");
      expect(lease?.value).toBe("taken");
      lease?.release();
    }
  } finally {
    other.close();
    b.close();
  }
});

const AT = 1_000_000;

/**
 * What a rewrite gets at each step, each after our monotonic clock moved `wait` ms and the pid
 * space "there" wrote its row ending at `row` (our wall clock stays at AT).
 */
async function rewrites(steps: { wait: number; row?: number }[]): Promise<(string | undefined)[]> {
  using dir = tmpdir();
  let steady = 0;
  const b = Store.open(dir.path, {
    leases: {
      now: () => AT,
      mono: () => (steady += TAKEOVER_GRACE_MS / 3),
      alive: () => false,
      space: "here",
    },
  });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    const got: (string | undefined)[] = [];
    for (const { wait, row } of steps) {
      steady += wait;
      if (row !== undefined)
        other.run("INSERT OR REPLACE INTO session_leases VALUES ('u', 's', '1:abcdef@there', 1, ?)", [row]);
      const lease = await b.tryLease("u", "s", never, () => "taken");
      lease?.release();
      got.push(lease?.value);
    }
    return got;
  } finally {
    other.close();
    b.close();
  }
}

/** A row ending `ahead` ms past our clock, at once and after it stood unchanged for a TTL here. */
const rewriteAgainst = (ahead: number) => rewrites([{ wait: 0, row: AT + ahead }, { wait: LEASE_TTL_MS }]);

// Two machines on a network folder: the holder's clock a few seconds ahead of this one wrote its
// row more than a TTL ahead of this core's clock, which a row of this pid space is only after
// this core's clock stepped back (docs/agent.md): read as run out, the live holder's lease was
// taken a grace later, two cores writing one session's turn. A frozen holder's row, however far
// ahead its clock, is waited out a TTL and a grace on ours (once 10 minutes past its end).
test("a lease of another pid space whose clock is ahead is held until it stood still here", async () => {
  expect(await rewriteAgainst(5_000 + LEASE_TTL_MS)).toEqual([undefined, "taken"]);
});

// Two machines on a network folder, the holder's clock 5 minutes behind ours: each row it writes
// (and renews every 10 s) ends before our wall clock's now, so this core read its live lease as
// run out and took it a grace later, two cores writing one session's turn. Another pid space's
// row is timed on this core's own monotonic clock (store/lease-sightings.ts): live while its
// value changes, taken once it stood unchanged for a TTL and the grace.
test("a live lease of another pid space whose clock is behind ours is not taken", async () => {
  const theirs = AT - 5 * 60_000 + LEASE_TTL_MS;
  // Its holder renews (its own clock 10 s on) while ours moves most of a TTL: still live; then
  // it stops, and its row stands unchanged for a TTL on our clock.
  const renewals = [1, 2, 3].map((i) => ({
    wait: LEASE_TTL_MS - TAKEOVER_GRACE_MS,
    row: theirs + i * 10_000,
  }));
  expect(await rewrites([{ wait: 0, row: theirs }, ...renewals, { wait: LEASE_TTL_MS }])).toEqual([
    undefined,
    undefined,
    undefined,
    undefined,
    "taken",
  ]);
});
