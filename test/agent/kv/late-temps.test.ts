import { afterEach, beforeEach, expect, spyOn, test } from "bun:test";
import * as fs from "node:fs";
import { join } from "node:path";
import { LATE_LOOK, lateTempsAtExit, watchLateTemp } from "../../../src/agent/kv/kv-temps.ts";
import { logger } from "../../../src/util/logger.ts";
import { tmpdir } from "../../fixtures/tmpdir.ts";

// A late save's temp (kv-temps.ts `watchLateTemp`), its server an exit promise and its removal a
// stand-in: looked for past its fast looks, a bounded number at a time.

const look = { ...LATE_LOOK };
beforeEach(() => {
  Object.assign(LATE_LOOK, { ms: 5, times: 1, slowMs: 5 });
});
afterEach(() => {
  Object.assign(LATE_LOOK, look);
});

const never = new Promise<void>(() => {});
/** llama-server's loop answering at once. */
const answered = async () => true;
/** Whose removals these are (a folder's `Zeroes` in the core). */
const owner = {};
const until = async (done: () => boolean) => {
  for (let t = 0; t < 100 && !done(); t++) await new Promise((r) => setTimeout(r, 5));
};

test("a save llama-server ran after the fast looks ended: its file is still looked for and removed", async () => {
  using dir = tmpdir();
  const temp = join(dir.path, "late.tmp");
  watchLateTemp(temp, never, () => fs.rmSync(temp, { force: true }), answered, owner);
  await new Promise((r) => setTimeout(r, 30)); // the one fast look spent
  fs.writeFileSync(temp, "tokens of my secret diagnosis\n");
  await until(() => !fs.existsSync(temp));
  expect(fs.existsSync(temp)).toBe(false);
});

test("past the bound, the oldest watched temp is no longer looked for", async () => {
  using dir = tmpdir();
  LATE_LOOK.max = 1;
  const [first, second] = [join(dir.path, "first.tmp"), join(dir.path, "second.tmp")];
  const dropped: string[] = [];
  watchLateTemp(first, never, () => dropped.push(first), answered, owner);
  watchLateTemp(second, never, () => dropped.push(second), answered, owner);
  fs.writeFileSync(first, "a");
  fs.writeFileSync(second, "b");
  await until(() => dropped.length > 0);
  await new Promise((r) => setTimeout(r, 30));
  expect(dropped).toEqual([second]);
});

test("a write stalled between two looks is not zeroed under it: llama-server's loop answers first", async () => {
  using dir = tmpdir();
  LATE_LOOK.times = 100;
  const temp = join(dir.path, "stalled.tmp");
  fs.writeFileSync(temp, "part of the state\n");
  let resumed = false;
  // The loop answers once the save's task is over: the stalled write ends before that answer.
  const queued = async () => {
    if (!resumed) fs.appendFileSync(temp, "the rest of the state\n");
    resumed = true;
    return true;
  };
  let atDrop = "";
  watchLateTemp(
    temp,
    never,
    () => {
      atDrop = fs.readFileSync(temp, "utf8");
      fs.rmSync(temp);
    },
    queued,
    owner,
  );
  await until(() => !fs.existsSync(temp));
  expect(atDrop).toBe("part of the state\nthe rest of the state\n");
});

test("with no answer from llama-server's loop the file is left for a later look", async () => {
  using dir = tmpdir();
  LATE_LOOK.times = 100;
  const temp = join(dir.path, "unproven.tmp");
  fs.writeFileSync(temp, "state\n");
  let asked = 0;
  let dropped = false;
  watchLateTemp(
    temp,
    never,
    () => {
      dropped = true;
    },
    async () => ++asked > 2,
    owner,
  );
  await until(() => dropped);
  expect(asked).toBe(3);
});

test("at shutdown, servers whose exits are never seen hold it once, briefly, not 60 s a file", async () => {
  using dir = tmpdir();
  // The client kills a core that has not answered `shutdown` within llama-server's grace and 7 s
  // (client/shutdown-timing.ts): a longer wait here left the files whole, unremoved.
  expect(look.atShutdownMs).toBeLessThanOrEqual(1000);
  LATE_LOOK.atShutdownMs = 20;
  const mine = {};
  const temps = ["a.tmp", "b.tmp", "c.tmp"].map((n) => join(dir.path, n));
  for (const temp of temps) {
    fs.writeFileSync(temp, "tokens of my secret diagnosis\n");
    // Each one's server SIGKILLed and stuck in the kernel: its exit is never seen.
    watchLateTemp(
      temp,
      never,
      () => fs.rmSync(temp, { force: true }),
      async () => false,
      mine,
    );
  }
  await lateTempsAtExit(mine);
  expect(temps.filter((t) => fs.existsSync(t))).toEqual([]);
}, 2000);

test("the bound is per KV folder: another folder's late temps do not end this one's looks", async () => {
  using dir = tmpdir();
  LATE_LOOK.max = 1;
  const [mine, theirs] = [join(dir.path, "mine.tmp"), join(dir.path, "theirs.tmp")];
  const dropped: string[] = [];
  watchLateTemp(mine, never, () => dropped.push(mine), answered, {});
  watchLateTemp(theirs, never, () => dropped.push(theirs), answered, {});
  fs.writeFileSync(mine, "a");
  fs.writeFileSync(theirs, "b");
  await until(() => dropped.length > 1);
  expect(dropped.sort()).toEqual([mine, theirs].sort());
});

test("the removals kept for a server's exit are bounded: past the bound the oldest is given up", async () => {
  using dir = tmpdir();
  LATE_LOOK.atExitMax = 2;
  LATE_LOOK.times = 1000; // no look finds them before the exit
  const mine = {};
  const exit = Promise.withResolvers<void>();
  const temps = ["1.tmp", "2.tmp", "3.tmp"].map((n) => join(dir.path, n));
  const dropped: string[] = [];
  for (const temp of temps) {
    fs.writeFileSync(temp, "state\n");
    watchLateTemp(
      temp,
      exit.promise,
      () => dropped.push(temp),
      async () => false,
      mine,
    );
  }
  exit.resolve();
  await lateTempsAtExit(mine);
  // One closure a save that did not answer, kept until its server's exit, grew without end on a
  // server up for weeks; the one given up is left to a later erase's sweep or the next start.
  expect(dropped).toEqual(temps.slice(1));
});

test("a late file a look removed keeps no removal for its server's exit", async () => {
  using dir = tmpdir();
  const warned: string[] = [];
  const warnSpy = spyOn(logger, "warn").mockImplementation(((m: string) => {
    warned.push(m);
  }) as typeof logger.warn);
  LATE_LOOK.atExitMax = 1;
  const mine = {};
  const exit = Promise.withResolvers<void>();
  const [found, later] = [join(dir.path, "found.tmp"), join(dir.path, "later.tmp")];
  const dropped: string[] = [];
  fs.writeFileSync(found, "a");
  watchLateTemp(found, exit.promise, () => fs.rmSync(found), answered, mine);
  await until(() => !fs.existsSync(found));
  LATE_LOOK.times = 1000; // the second is not looked at again before the exit
  watchLateTemp(
    later,
    exit.promise,
    () => dropped.push(later),
    async () => false,
    mine,
  );
  fs.writeFileSync(later, "b");
  exit.resolve();
  await lateTempsAtExit(mine);
  warnSpy.mockRestore();
  expect(dropped).toEqual([later]);
  // Kept, the one removed counted to the bound: a warning named it given up, a removal wasted.
  expect(warned.filter((w) => w.includes("not removed at its server's exit"))).toEqual([]);
});
