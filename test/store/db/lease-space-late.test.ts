import { Database } from "bun:sqlite";
import { expect, jest, test } from "bun:test";
import { join } from "node:path";
import { spaceOf } from "../../../src/platform/pid-space.ts";
import { DB_FILE } from "../../../src/store/db/open.ts";
import { SessionLeases } from "../../../src/store/session-lease.ts";
import { Store } from "../../../src/store/store.ts";
import { refuseIfTakenOver } from "../../../src/store/turn-mark.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A passing read failure of /proc/sys/kernel/random/boot_id (EMFILE at start-up) gives a pid space
// without its boot's part (platform/pid-space.ts `cachedSpace`, asked again later). The lease's
// owner took it once, at construction: for the core's life its rows named that partial space,
// and its own pid space's other cores judged them another machine's, waiting a TTL (30 s) for a
// holder they could see was dead.

const never = new AbortController().signal;
const ns = "pid:[4026531836]";
const PARTIAL = spaceOf("box", "", ns);
const WHOLE = spaceOf("box", "boot-1", ns);

test("the lease's owner takes the pid space once it is whole, its held rows and turn marks still its own", async () => {
  using dir = tmpdir();
  Store.open(dir.path).close();
  const db = new Database(join(dir.path, DB_FILE));
  let space = PARTIAL;
  let wall = 1_000_000_000;
  const leases = new SessionLeases(db, { now: () => wall, space: () => space });
  const rowOwner = () =>
    (db.query("SELECT owner FROM session_leases").get() as { owner: string } | null)?.owner;
  jest.useFakeTimers();
  try {
    const mark = leases.owner;
    const first = await leases.acquire("u", "s", never, () => undefined);
    expect(rowOwner()).toEndWith(`@${PARTIAL}`);
    space = WHOLE;
    expect(leases.owner).toEndWith(`@${WHOLE}`);
    // A turn begun with the partial owner is still this holder's.
    expect(leases.holds("u", "s")).toBe(true);
    expect(() => refuseIfTakenOver(db, "u", "s", mark)).not.toThrow();
    // Its next renewal writes the whole space; its release removes the row.
    wall += 10_000;
    jest.advanceTimersByTime(10_000);
    expect(rowOwner()).toBe(leases.owner);
    first.release();
    expect(rowOwner()).toBeUndefined();
    const second = await leases.acquire("u", "s", never, () => undefined);
    expect(rowOwner()).toEndWith(`@${WHOLE}`);
    second.release();
  } finally {
    jest.useRealTimers();
    db.close();
  }
});
