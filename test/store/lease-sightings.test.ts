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
