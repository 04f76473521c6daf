import { expect, test } from "bun:test";
import { LeaseSightings } from "../../src/store/lease-sightings.ts";

// The map is bounded by dropping its oldest entry, which was the oldest first seen, not the
// least lately looked at: a core waiting out another machine's frozen lease (polled every 50 ms)
// while its rewrites met MAX other sessions' rows had that very entry dropped, its 30 s begun
// again each time (docs/agent.md, "Two cores on one data folder"), a wait without end.
test("a row still being looked at is kept while others come and go past the bound", () => {
  const seen = new LeaseSightings();
  const row = { owner: "1:ab@there", expires_at: 5 };
  expect(seen.unchangedFor("waited", row, 0)).toBe(0);
  for (let i = 1; i <= LeaseSightings.MAX; i++) {
    seen.unchangedFor(`other-${i}`, { owner: `1:${i}@there`, expires_at: 5 }, i);
    expect(seen.unchangedFor("waited", row, i)).toBe(i);
  }
});

// With `keepTimed` (a KV folder's temps, kv-temps.ts), the bound kept every entry until its temp
// went: temps another writer keeps writing (each look a new size) held every slot, and a
// crash's temp, standing still, was never timed, left for the one-day rule. One changing at its
// last look gives way now (its time restarts at each change anyway); one being timed never does.
test("temps that keep changing give way to one standing still", () => {
  const seen = new LeaseSightings(true);
  const writing = (look: number) => {
    for (let i = 0; i < LeaseSightings.MAX; i++)
      seen.unchangedFor(`w-${i}`, { owner: String(look), expires_at: 5 }, look);
  };
  writing(0);
  writing(1);
  const still = { owner: "4", expires_at: 5 };
  expect(seen.unchangedFor("crash", still, 1)).toBe(0);
  writing(2);
  expect(seen.unchangedFor("crash", still, 600_001)).toBe(600_000);
});

test("with keepTimed, first sightings and those being timed are never dropped for a newcomer", () => {
  const seen = new LeaseSightings(true);
  const row = { owner: "1", expires_at: 5 };
  for (let i = 0; i < LeaseSightings.MAX; i++) seen.unchangedFor(`t-${i}`, row, 0);
  expect(seen.unchangedFor("late", row, 1)).toBe(0);
  expect(seen.unchangedFor("late", row, 2)).toBe(0); // no room: untimed
  expect(seen.unchangedFor("t-0", row, 3)).toBe(3);
});

// A save's temp seen while its writer wrote it (a new size at the next look), then left standing
// when the writer crashed: its mark of having changed stayed on while it stood still, being
// timed, and a newcomer at the bound took its room, its time lost. Each such loss restarted its
// 10 minutes: a deleted session's tokens in it waited for the one-day rule instead.
test("a temp that changed once, then stands still, keeps its time against newcomers", () => {
  const seen = new LeaseSightings(true);
  expect(seen.unchangedFor("crash", { owner: "1", expires_at: 5 }, 0)).toBe(0);
  const still = { owner: "2", expires_at: 6 };
  expect(seen.unchangedFor("crash", still, 1)).toBe(0); // written on: timed from here
  expect(seen.unchangedFor("crash", still, 2)).toBe(1); // standing still since
  const row = { owner: "1", expires_at: 5 };
  for (let i = 0; i < LeaseSightings.MAX; i++) seen.unchangedFor(`new-${i}`, row, 3);
  expect(seen.unchangedFor("crash", still, 600_001)).toBe(600_000);
});
