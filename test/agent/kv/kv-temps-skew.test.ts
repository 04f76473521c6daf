import { expect, test } from "bun:test";
import { appendFileSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { leftoverTemp, STALE_TEMP_MS } from "../../../src/agent/kv/kv-temps.ts";
import { spaceOf } from "../../../src/platform/pid-space.ts";
import { LeaseSightings } from "../../../src/store/lease-sightings.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Another machine on a network folder writes a KV save under its temporary name; the file's time
// is its (or the file server's) clock. One behind ours by over 10 minutes made a save being
// written read here as 10 minutes untouched: removed under its writer at this core's sweep. Another
// pid space's temp is judged on this core's monotonic clock (store/lease-sightings.ts): stale once
// seen unchanged (size and time) for STALE_TEMP_MS here, or a day old whatever the clocks say.
const here = spaceOf("box", "boot-1", "pid:[4026531836]");
const there = spaceOf("far", "boot-9", "pid:[4026531836]");
const name = `s-${"a".repeat(32)}.7-0123abcd-${there}.tmp`;

function temp(dir: string, writtenMs: number): string {
  const path = join(dir, name);
  writeFileSync(path, "part of a save");
  utimesSync(path, writtenMs / 1000, writtenMs / 1000);
  return path;
}

test("another space's temp written by a clock 11 minutes behind is kept until seen still", () => {
  using dir = tmpdir();
  const now = Date.now();
  const path = temp(dir.path, now - 11 * 60_000);
  const seen = new LeaseSightings();
  expect(leftoverTemp(name, path, here, now, seen, 0)).toBe(false);
  // Its writer goes on: a new size, seen afresh.
  appendFileSync(path, " and more");
  utimesSync(path, (now - 10 * 60_000) / 1000, (now - 10 * 60_000) / 1000);
  expect(leftoverTemp(name, path, here, now, seen, STALE_TEMP_MS - 1)).toBe(false);
  expect(leftoverTemp(name, path, here, now, seen, 2 * STALE_TEMP_MS - 2)).toBe(false);
  // Unchanged for STALE_TEMP_MS on our monotonic clock: its writer is gone.
  expect(leftoverTemp(name, path, here, now, seen, 2 * STALE_TEMP_MS)).toBe(true);
});

test("another space's temp a day old goes at its first sighting", () => {
  using dir = tmpdir();
  const now = Date.now();
  const path = temp(dir.path, now - 25 * 3_600_000);
  expect(leftoverTemp(name, path, here, now, new LeaseSightings(), 0)).toBe(true);
});

/** A live pid's temp of this space whose time reads 11 minutes behind ours: kept until seen still. */
function keptUntilStill(pid: number): void {
  using dir = tmpdir();
  const now = Date.now();
  const f = `s-${"b".repeat(32)}.${pid}-0123abcd-${here}.tmp`;
  const path = join(dir.path, f);
  writeFileSync(path, "part of a save");
  utimesSync(path, (now - 11 * 60_000) / 1000, (now - 11 * 60_000) / 1000);
  const seen = new LeaseSightings();
  expect(leftoverTemp(f, path, here, now, seen, 0)).toBe(false);
  expect(leftoverTemp(f, path, here, now, seen, STALE_TEMP_MS - 1)).toBe(false);
  expect(leftoverTemp(f, path, here, now, seen, STALE_TEMP_MS)).toBe(true);
}

// Two cores of one host on a data folder on a network share: the file's time is the file
// server's clock, and one behind ours by over 10 minutes made the other core's save (its pid
// alive) read as stale, removed under it. Another live pid's temp is timed on our monotonic clock.
test("this space's temp of another live pid, its time 11 minutes behind, is kept until seen still", () => {
  // The test runner's parent: a live process that is not this one.
  keptUntilStill(process.ppid);
});

// The same share, this core's own save: llama-server writes it under this core's pid, and the
// file's time is the file server's clock. One behind ours by over 10 minutes made a save just
// begun read as stale, removed under llama-server by a sweep (any sessions.delete meanwhile), the
// save lost. This core's own live temp is timed on our monotonic clock as another pid's is.
test("this core's own temp, its time 11 minutes behind, is kept until seen still", () => {
  keptUntilStill(process.pid);
});
