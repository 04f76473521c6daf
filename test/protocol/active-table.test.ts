import { expect, test } from "bun:test";
import { ActiveTable } from "../../src/protocol/active-table.ts";

// status lists at most the oldest requests in flight, read without walking the whole table
// (a hostile review: a burst of thousands of status requests listed all of them each time).

interface Req {
  since: number;
  answered: boolean;
}

test("oldest: the oldest picked entries across string and number ids, at most the limit", () => {
  const table = new ActiveTable<Req>();
  for (let i = 0; i < 1000; i++) table.set(i % 2 === 0 ? `s${i}` : i, { since: i, answered: i % 3 === 0 });
  const oldest = table.oldest(
    5,
    (r) => !r.answered,
    (r) => r.since,
  );
  expect(oldest.map((r) => r.since)).toEqual([1, 2, 4, 5, 7]);
  let looked = 0;
  table.oldest(
    5,
    (r) => {
      looked++;
      return !r.answered;
    },
    (r) => r.since,
  );
  // Each map is read only until it gave five: nowhere near the thousand entries.
  expect(looked).toBeLessThan(20);
});
