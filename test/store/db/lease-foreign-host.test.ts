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

test("a lease held in another pid space is not taken at once, only once it ran out", async () => {
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
    // Run out: taken once seen so for the grace, each poll a good part of it later.
    at += LEASE_TTL_MS + 1;
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

/** What a rewrite gets against a row of the pid space "there" ending `ahead` ms past our clock. */
async function rewriteAgainst(ahead: number): Promise<string | undefined> {
  using dir = tmpdir();
  const at = 1_000_000;
  let steady = 0;
  const b = Store.open(dir.path, {
    leases: {
      now: () => at,
      mono: () => (steady += TAKEOVER_GRACE_MS / 3),
      alive: () => false,
      space: "here",
    },
  });
  const other = new Database(join(dir.path, DB_FILE));
  try {
    other.run("INSERT INTO session_leases VALUES ('u', 's', '1:abcdef@there', 1, ?)", [at + ahead]);
    const lease = await b.tryLease("u", "s", never, () => "taken");
    lease?.release();
    return lease?.value;
  } finally {
    other.close();
    b.close();
  }
}

// Two machines on a network folder: the holder's clock a few seconds ahead of this one wrote its
// row more than a TTL ahead of this core's clock, which a row of this pid space is only after
// this core's clock stepped back (docs/agent.md): read as run out, the live holder's lease was
// taken a grace later, two cores writing one session's turn.
test("a live lease of another pid space whose clock is ahead of ours is not taken", async () => {
  expect(await rewriteAgainst(5_000 + LEASE_TTL_MS)).toBeUndefined();
});

test("a lease of another pid space ahead of our clock by more than its skew allowance runs out", async () => {
  // A frozen holder's row written by a clock hours ahead: waited out a grace, not for hours.
  expect(await rewriteAgainst(3 * 3_600_000)).toBe("taken");
});
