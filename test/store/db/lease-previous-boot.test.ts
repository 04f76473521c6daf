import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { join } from "node:path";
import { spaceOf } from "../../../src/platform/pid-space.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { LEASE_TTL_MS, TAKEOVER_GRACE_MS } from "../../../src/store/session-lease.ts";
import { Store } from "../../../src/store/store.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A crash or power cut mid-turn, then a reboot: the lease the previous core left names this
// host's previous boot, which read as another pid space (its boot id changed), so the app's crash
// recovery, resuming exactly that session, hung 31 s before its first chat (~1 s before pid
// spaces). A previous boot's holder is gone: its row is judged by its wall-clock end and the grace,
// as our own space's is; another machine's stays waited out (lease-foreign-host.test.ts).

const never = new AbortController().signal;
const NS = "pid:[4026531836]";
const AT = 1_000_000;

/**
 * What a rewrite gets against a row of `space` ending at `end` (our wall clock at AT), and how
 * many polls it made, our monotonic clock a third of the grace on at each.
 */
async function rewriteAgainst(
  space: string,
  end: number,
  bootAt?: () => number,
): Promise<[string | undefined, number]> {
  using dir = tmpdir();
  let polls = 0;
  const here = spaceOf("box", "boot-2", NS);
  // After a reboot pid 1 (or any) is some process again: alive.
  const leases = {
    now: () => AT,
    mono: () => ++polls * (TAKEOVER_GRACE_MS / 3),
    alive: () => true,
    space: here,
    bootAt,
  };
  const b = Store.open(dir.path, { leases });
  const other = new Database(join(dir.path, DB_FILE));
  other.run("INSERT INTO session_leases VALUES ('u', 's', ?, 1, ?)", [`1:abcdef@${space}`, end]);
  other.close();
  try {
    const lease = await b.tryLease("u", "s", never, () => "taken");
    lease?.release();
    return [lease?.value, polls];
  } finally {
    b.close();
  }
}

test("a previous boot's lease, run out by the wall clock, is taken after the grace", async () => {
  // The grace in a few polls, not a TTL's wait on our own clock first.
  const [value, polls] = await rewriteAgainst(spaceOf("box", "boot-1", NS), AT - 60_000);
  expect([value, polls <= 6]).toEqual(["taken", true]);
});

test("a previous boot's lease not yet run out is held: a same-named machine's may be live", async () => {
  expect((await rewriteAgainst(spaceOf("box", "boot-1", NS), AT + LEASE_TTL_MS))[0]).toBeUndefined();
});

test("another machine's run-out row is still waited out on our clock", async () => {
  expect((await rewriteAgainst(spaceOf("elsewhere", "boot-1", NS), AT - 60_000))[0]).toBeUndefined();
});

// Two machines of one host name on one network folder read each other as a previous boot. The
// other's clock 2 minutes behind ours: its live lease, renewed just now, read as run out and was
// taken after the grace, two cores writing one conversation. A previous boot's row was last
// written before this boot began; one renewed since is another machine's, waited out.
test("a same-named machine's lease renewed since this boot is waited out, not taken", async () => {
  const renewed = AT - 120_000;
  const [value] = await rewriteAgainst(
    spaceOf("box", "boot-1", NS),
    renewed + LEASE_TTL_MS,
    () => AT - 3_600_000,
  );
  expect(value).toBeUndefined();
  // The same row, its last renewal before this boot began: a previous boot's, taken.
  expect((await rewriteAgainst(spaceOf("box", "boot-1", NS), renewed + LEASE_TTL_MS, () => AT))[0]).toBe(
    "taken",
  );
});
