import { expect, test } from "bun:test";
import { readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { STALE_TEMP_MS } from "../../../src/agent/kv/kv-temps.ts";
import { spaceOf } from "../../../src/platform/pid-space.ts";
import { LeaseSightings } from "../../../src/store/lease-sightings.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// Another pid space's temps (a second machine's saves cut short on a shared KV folder) are timed
// on this core's monotonic clock (kv-temps.ts). Past the sightings' bound, each one looked at
// dropped the least lately looked at: a sweep over more temps than that dropped every sighting
// before it was looked at again, each seen afresh at every sweep, none ever 10 minutes still: they
// lingered (a deleted session's tokens with them) until the one-day rule. The sightings kept now
// stay until their temp goes; a newcomer past the bound is timed once there is room.
test("more lingering temps than the sightings' bound still go once seen still", async () => {
  using dir = tmpdir();
  const here = spaceOf("box", "boot-1", "pid:[4026531836]");
  const there = spaceOf("far", "boot-9", "pid:[4026531836]");
  let mono = 0;
  const disk = new KvDisk(
    dir.path,
    1 << 30,
    Date.now,
    () => here,
    () => mono,
  );
  const count = LeaseSightings.MAX + 44;
  for (let i = 0; i < count; i++)
    writeFileSync(join(dir.path, `s-${i.toString(16).padStart(32, "0")}.7-0123abcd-${there}.tmp`), "part");
  const temps = () => readdirSync(dir.path).filter((f) => f.endsWith(".tmp")).length;
  disk.sweep();
  expect(temps()).toBe(count);
  mono = STALE_TEMP_MS;
  disk.sweep();
  expect(temps()).toBeLessThan(count);
  mono = 2 * STALE_TEMP_MS;
  disk.sweep();
  expect(temps()).toBe(0);
  await disk.zeroes.done();
});

// A folder that could not be listed for a moment (a share's hiccup, EMFILE) is no folder emptied:
// read as one, every temp's sighting in it was forgotten, each timed afresh, and saves cut short
// (a deleted session's tokens with them) lingered past their 10 minutes, for good while it recurred.
test("a sweep whose listing fails keeps the temps' sightings", async () => {
  using dir = tmpdir();
  const kv = join(dir.path, "kv");
  const here = spaceOf("box", "boot-1", "pid:[4026531836]");
  const there = spaceOf("far", "boot-9", "pid:[4026531836]");
  let mono = 0;
  const disk = new KvDisk(
    kv,
    1 << 30,
    Date.now,
    () => here,
    () => mono,
  );
  disk.sweep();
  writeFileSync(join(kv, `s-${"0".repeat(32)}.7-0123abcd-${there}.tmp`), "part");
  disk.sweep();
  // The folder's place holds a file a moment: its listing fails (ENOTDIR) in an erase's sweep.
  renameSync(kv, `${kv}.away`);
  writeFileSync(kv, "");
  mono = STALE_TEMP_MS / 2;
  disk.removeSession("u", "s");
  rmSync(kv);
  renameSync(`${kv}.away`, kv);
  mono = STALE_TEMP_MS;
  disk.sweep();
  expect(readdirSync(kv).filter((f) => f.endsWith(".tmp"))).toEqual([]);
  await disk.zeroes.done();
});
