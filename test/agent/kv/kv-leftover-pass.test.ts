import { afterEach, expect, test } from "bun:test";
import { mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KvDisk } from "../../../src/agent/kv/kv-disk.ts";
import { LEFTOVER_PASS, LeftoverPass, STALE_TEMP_MS } from "../../../src/agent/kv/kv-temps.ts";
import { spaceOf } from "../../../src/platform/pid-space.ts";
import { LeaseSightings } from "../../../src/store/lease-sightings.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A KV folder's leftover temps were each stat'ed, all of them, synchronously on the main loop
// at first use and at every erase: a folder of 100,000 (or one on a slow share) held ping and
// cancel for the whole pass. A pass judges a bounded number now, the next going on after it;
// an erased session's own temps are removed by name whatever the bound.
const max = LEFTOVER_PASS.max;
afterEach(() => {
  LEFTOVER_PASS.max = max;
});

/** A temp of session `i` whose writer (pid 99999999) is no process: a leftover at once. */
const dead = (i: number) => `s-${i.toString(16).padStart(32, "0")}.99999999-0123abcd.tmp`;
const temps = (dir: string) => readdirSync(dir).filter((f) => f.endsWith(".tmp"));

test("a sweep judges a bounded number of temps; the passes after take the rest", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  for (let i = 0; i < 10; i++) writeFileSync(join(dir.path, dead(i)), "part");
  LEFTOVER_PASS.max = 4;
  const left: number[] = [];
  for (let pass = 0; pass < 3; pass++) {
    disk.sweep();
    left.push(temps(dir.path).length);
  }
  expect(left).toEqual([6, 2, 0]);
  await disk.zeroes.done();
});

test("an erased session's temps go whatever the bound", async () => {
  using dir = tmpdir();
  const disk = new KvDisk(dir.path, 1 << 30);
  for (let i = 0; i < 10; i++) writeFileSync(join(dir.path, dead(i)), "part");
  const name = disk.nameOf("u", "s");
  const own = `${name}.${process.pid}-0123abcd.tmp`; // its writer alive: no leftover by age
  writeFileSync(join(dir.path, own), "tokens");
  LEFTOVER_PASS.max = 1;
  disk.removeSession("u", "s");
  await disk.zeroes.done();
  const now = temps(dir.path);
  expect({ own: now.includes(own), others: now.length }).toEqual({ own: false, others: 9 });
});

// Every KvDisk's temps were timed in one module-wide table: a folder no longer swept (an earlier
// data_dir's) kept its sightings for good, and once they filled the bound a new folder's temps
// went untimed, a dead machine's save cut short left for a day instead of 10 minutes.
test("another folder's sightings hold no room of this one's", async () => {
  using dir = tmpdir();
  const here = spaceOf("box", "boot-1", "pid:[4026531836]");
  const there = spaceOf("far", "boot-9", "pid:[4026531836]");
  let mono = 0;
  const diskIn = (path: string) =>
    new KvDisk(
      path,
      1 << 30,
      Date.now,
      () => here,
      () => mono,
    );
  const temp = (i: number) => `s-${i.toString(16).padStart(32, "0")}.7-0123abcd-${there}.tmp`;
  const old = join(dir.path, "old");
  mkdirSync(old);
  for (let i = 0; i < LeaseSightings.MAX; i++) writeFileSync(join(old, temp(i)), "part");
  diskIn(old).sweep();
  const now = join(dir.path, "kv");
  const disk = diskIn(now);
  disk.sweep();
  writeFileSync(join(now, temp(0)), "part");
  disk.sweep();
  mono = STALE_TEMP_MS;
  disk.sweep();
  expect(temps(now)).toEqual([]);
  await disk.zeroes.done();
});

// The pass went on at an index into the folder's listing, which is in no order: temps added
// between passes shifted it, and the same ones were judged pass after pass, others never (a
// dead core's save cut short, a deleted session's tokens, left for good). Keyed by name now.
test("a listing that changes between passes still has every temp judged within its passes", () => {
  using dir = tmpdir();
  const pass = new LeftoverPass();
  // This process's own temps: live writers, so none is dropped and the listing only grows.
  const live = (i: number) => `s-${i.toString(16).padStart(32, "0")}.${process.pid}-0123abcd.tmp`;
  const first = Array.from({ length: 12 }, (_, i) => live(1000 + i));
  for (const f of first) writeFileSync(join(dir.path, f), "part");
  LEFTOVER_PASS.max = 4;
  const judged = new Set<string>();
  for (let round = 0; round < 3; round++) {
    for (const f of pass.temps(dir.path)) judged.add(f);
    // Newcomers between passes (other saves begun), sorting before the first ones.
    for (let i = 0; i < 4; i++) writeFileSync(join(dir.path, live(round * 4 + i)), "part");
  }
  expect(first.filter((f) => !judged.has(f))).toEqual([]);
});
