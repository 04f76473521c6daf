import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, type Stats, statSync } from "node:fs";
import { basename, dirname } from "node:path";
import { writtenRelation } from "../../platform/pid-space.ts";
import { LeaseSightings } from "../../store/lease-sightings.ts";
import { type FileIdentity, fileIdentity, sameFile } from "../../util/file-identity.ts";
import { logger } from "../../util/logger.ts";
import { nextTurn } from "../../util/next-turn.ts";
import { alive } from "./drop-file.ts";
import { exitWaitsEnded } from "./slot-clear.ts";

// The KV state folder's temporary names (kv-disk.ts): a save before it is whole, and when one is
// a leftover no save waits for (docs/agent.md, "Prompt reuse").

/**
 * A temporary file standing still this long has no save left waiting for it. One whose writer
 * (the pid in its name) is no longer a process goes at once: nothing will ever commit it, and it
 * holds a session's tokens (or its prompt record) that a sessions.delete must not leave behind. A
 * live pid (this core's own, a pid reused) or a writer of another pid space falls back to the time
 * it is seen unchanged (`leftoverTemp`).
 */
export const STALE_TEMP_MS = 10 * 60_000;

/**
 * A state (`tempName`) or a sidecar (`.json.tmp`) before it is whole: its session's name, its
 * writer's pid and its writer's pid space (platform/pid-space.ts: 18 hex digits, 12 from the first
 * cores to write one), which names of cores before 2026-12-07 do not carry. Hex digits, '-' and
 * '.' only: llama-server's slot file name check (`fs_validate_filename`) refuses much else.
 */
export const OWN_TEMP =
  /^(s-[0-9a-f]{32})\.(\d+)-[0-9a-f]{8}(?:-([0-9a-f]{18}|[0-9a-f]{12}))?(?:\.json)?\.tmp$/;
/** A sidecar temp as cores before named ones left it (store/atomic.ts's random name): never a live one now. */
const UNNAMED_TEMP = /^\.[0-9a-f]{12}\.tmp$/;

/** A temporary name of this process for the session file `name` (`ext`: ".json" for a sidecar). */
export function tempName(name: string, space: string, ext = ""): string {
  return `${name}.${process.pid}-${randomBytes(4).toString("hex")}-${space}${ext}.tmp`;
}

/** A temp this old by the wall clock goes whatever was seen (`leftoverTemp`): no two clocks in use differ by a day. */
export const FOREIGN_TEMP_MS = 24 * 3_600_000;

/**
 * Whether the folder's file `f` (at `path`) is a temporary one no save waits for. Its pid is
 * judged only where it names a process here: a writer of another pid space (another container's
 * or machine's core sharing the folder, often pid 1 there) was dropped mid-write for a pid that
 * names no process here. A name without a space (an earlier core's) is judged by its pid as
 * before; one of this host's previous boot, written before this boot began, goes at once. Throws when `path` cannot be read (the caller leaves it).
 */
export function leftoverTemp(
  f: string,
  path: string,
  space: string,
  now: number,
  /** Temps whose writer may live, as this folder's sweeps saw them (`LeftoverPass.seen`). */
  seen: LeaseSightings,
  mono = performance.now(),
): boolean {
  const m = OWN_TEMP.exec(f);
  if (!m) return UNNAMED_TEMP.test(f);
  const st = statSync(path);
  const where = m[3] === undefined ? "own" : writtenRelation(m[3], space, st.mtimeMs);
  // A previous boot's writer is gone, whatever its pid names now.
  if (where === "previous_boot" || (where === "own" && !alive(Number(m[2])))) return true;
  // A live pid's (this core's own, a second core of this host, or a pid reused) as another
  // space's: on a network share the file's time is the file server's clock, and one behind ours
  // by over 10 minutes made a save just begun read as stale, this core's own included.
  const left = stillFor(path, st, seen, mono) >= STALE_TEMP_MS || now - st.mtimeMs > FOREIGN_TEMP_MS;
  if (left) seen.forget(path); // its room for a temp past the bound (`LeaseSightings` keepTimed)
  return left;
}

/**
 * Before a sweep of `dir` (its listing, returned): the sightings of its temps no longer there
 * (removed by another core, or by hand) forgotten, their room free. One that cannot be listed (a
 * share's hiccup, EMFILE) is not emptied: read so, each temp was timed afresh, none ever 10
 * minutes still while it recurred, a deleted session's save cut short left for a day.
 */
function forgetTempsGone(dir: string, seen: LeaseSightings): string[] {
  let listing: string[];
  try {
    listing = readdirSync(dir);
  } catch {
    return [];
  }
  const present = new Set(listing);
  seen.forgetWhere((path) => dirname(path) === dir && !present.has(basename(path)));
  return listing;
}

/**
 * How long (ms, on our monotonic clock) a temp has stood as it is: its time was set
 * by its writer's or a file server's clock, and one behind ours by over STALE_TEMP_MS made a save
 * being written read as stale here, removed under its writer (docs/agent.md, "Prompt reuse").
 */
const stillFor = (path: string, st: Stats, seen: LeaseSightings, mono: number) =>
  seen.unchangedFor(path, { owner: String(st.size), expires_at: st.mtimeMs }, mono);

/** Temps judged per sweep, a stat each: a folder of 100,000 held the loop (ping with it). Lowered in tests. */
export const LEFTOVER_PASS = { max: 512 };

/**
 * The temps a sweep of a folder judges (`leftoverTemp`): at most `LEFTOVER_PASS.max`, each pass
 * going on by name after the last one judged, so over passes every one is judged. An erased
 * session's own are removed by name before (kv-disk.ts `erase`), never left to a pass.
 */
export class LeftoverPass {
  /**
   * The last temp judged. An index into the listing was shifted by temps added or removed
   * between passes (the listing is in no order): one could be skipped pass after pass.
   */
  private after = "";
  /**
   * Its folder's temps' sightings, its own: in one table for every folder, those of a folder no
   * longer swept (an earlier data_dir's) were never forgotten and held its room for good.
   */
  readonly seen = new LeaseSightings(true);

  temps(dir: string): string[] {
    const temps = forgetTempsGone(dir, this.seen).filter((f) => OWN_TEMP.test(f) || UNNAMED_TEMP.test(f));
    if (temps.length <= LEFTOVER_PASS.max) return temps;
    temps.sort();
    const start = Math.max(
      0,
      temps.findIndex((f) => f > this.after),
    );
    const pass = [...temps.slice(start), ...temps.slice(0, start)].slice(0, LEFTOVER_PASS.max);
    this.after = pass.at(-1) ?? "";
    return pass;
  }
}

/**
 * How a late save's temp is looked for (`watchLateTemp`): every `ms` for `times` looks, then every
 * `slowMs` until its server's exit, at most `max` temps at a time; at shutdown, their servers'
 * exits waited for `atShutdownMs` at most, all together (`lateTempsAtExit`). Lowered in tests.
 */
export const LATE_LOOK = {
  ms: 2_000,
  times: 60,
  slowMs: 30_000,
  max: 64,
  atShutdownMs: 1_000,
  /** Removals kept for one server's exit (`atExit`). */
  atExitMax: 1024,
};

/**
 * Per owner (a folder's `Zeroes`), the late temps looked for, oldest first, by path: each one's
 * end of looks. Per folder, so another's (a second model's, a test's) ends none of these.
 */
const watching = new WeakMap<object, Map<string, () => void>>();

/**
 * A save that did not answer, whose end was taken from the answer of an erase queued behind it
 * (slot-clear.ts `emptyBehind`), may still run: llama-server defers a slot action on a busy slot
 * and, a slot action naming no `id_slot` of its task, pops the deferred list's front, a popped
 * one whose slot is busy again going to its back, so the erase can answer first (b10587
 * server-queue.cpp `pop_deferred_task`). The file it then writes holds the slot's tokens past
 * that removal, a delete's answer included. Its temp name is never used again: a file there is
 * that save's, removed once it stood unchanged between two looks and after an answer of
 * llama-server's loop (`queued`), or at the server's exit, after which nothing writes it. One taken up
 * more than the fast looks late (all of llama-server's HTTP threads busy) is looked for at the
 * slow pace until that exit; past `LATE_LOOK.max` temps of its folder, the oldest is looked
 * for no more (docs/agent.md, "The store").
 */
export function watchLateTemp(
  path: string,
  exited: Promise<unknown>,
  drop: () => void,
  /** Resolves true once llama-server's loop answered a task queued now (`slotsAnswered`). */
  queued: () => Promise<boolean>,
  /** Whose removals these are (its folder's `Zeroes`), for `lateTempsAtExit`. */
  owner: object,
): void {
  const watched = watching.get(owner) ?? new Map<string, () => void>();
  watching.set(owner, watched);
  const removals = removalsAt(owner, exited);
  let last: FileIdentity | undefined;
  let looks = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const found = () => {
    logger.warn(`${path}: a save ran after the erase queued behind it answered: its file is removed`);
    drop();
  };
  const end = () => {
    clearTimeout(timer);
    if (watched.get(path) === end) watched.delete(path);
  };
  const next = () => {
    timer = setTimeout(look, ++looks < LATE_LOOK.times ? LATE_LOOK.ms : LATE_LOOK.slowMs);
    timer.unref?.();
  };
  // Unchanged between two looks is no proof over a stalled write (a hung share): llama-server
  // writes a save whole on its loop, so once a task queued after this look is answered, the save
  // that made the file is over; then the file must still be as seen (docs/agent.md, "The store").
  const look = () => {
    const now = fileIdentity(path);
    const still = last !== undefined && now !== undefined && sameFile(last, now);
    last = now;
    if (!still) return next();
    void queued()
      .catch(() => false)
      .then((over) => {
        if (watched.get(path) !== end) return; // its server exited, or looked for no more
        last = fileIdentity(path);
        if (!over || !sameFile(now, last)) return next();
        end();
        removals.delete(path); // nothing left for its server's exit: kept, it counted to the bound
        found();
      });
  };
  watched.set(path, end);
  for (const [oldest, stop] of watched) {
    if (watched.size <= LATE_LOOK.max) break;
    logger.warn(
      `${oldest}: a late save's file is looked for no more (${LATE_LOOK.max} at most): removed at its server's exit`,
    );
    stop();
  }
  timer = setTimeout(look, LATE_LOOK.ms);
  timer.unref?.();
  removals.set(path, () => {
    end();
    if (existsSync(path)) found();
  });
  for (const [oldest] of removals) {
    if (removals.size <= LATE_LOOK.atExitMax) break;
    logger.warn(
      `${oldest}: a late save's file is not removed at its server's exit (${LATE_LOOK.atExitMax} at most a server)`,
    );
    removals.delete(oldest);
  }
}

/**
 * Per owner (a folder's `Zeroes`), per server's exit, each late temp's removal then not yet done,
 * by path (`lateTempsAtExit`): a shutdown waits for its own servers' exits only. One callback on
 * each exit, and at most `LATE_LOOK.atExitMax` removals on it: one a save that did not answer,
 * kept until its server's exit, grew without end on a server up for weeks. One given up is left to
 * a later erase's sweep, or the next start's leftover pass (docs/agent.md, "The store").
 */
const atExit = new WeakMap<object, Map<Promise<unknown>, Map<string, () => void>>>();

function removalsAt(owner: object, exited: Promise<unknown>): Map<string, () => void> {
  const byExit = atExit.get(owner) ?? new Map<Promise<unknown>, Map<string, () => void>>();
  atExit.set(owner, byExit);
  const known = byExit.get(exited);
  if (known) return known;
  const removals = new Map<string, () => void>();
  byExit.set(exited, removals);
  void exited.then(() => runRemovals(byExit, exited));
  return removals;
}

/** The removals at `exited`, each once: by the exit's callback or by a shutdown's wait, first come. */
function runRemovals(byExit: Map<Promise<unknown>, Map<string, () => void>>, exited: Promise<unknown>): void {
  const removals = byExit.get(exited);
  byExit.delete(exited);
  for (const removal of removals?.values() ?? []) removal();
}

/**
 * At shutdown, after the servers' stops: each late temp's removal at its server's exit done, so
 * its zeroing is under way before the shutdown waits for the zeroings (server/kv-erase.ts
 * `atShutdown`): run by the exit's own callback alone, it came before that wait only by the order
 * of promise callbacks. The exits are waited for under one deadline, `atShutdownMs`, as are those
 * a save or restore cut off by its server's stop waits for (slot-clear.ts `exitWaitsEnded`),
 * first: what runs once they end (save-slot.ts) may watch a late temp. A stop that returned
 * without its exit seen SIGKILLed a server stuck in the kernel, and the client kills a core that
 * has not answered within the stop's grace and 7 s (client/shutdown-timing.ts), which 60 s a file
 * outlasted, the files left whole; removed then, only what a stuck write lands after is left in
 * the blocks (docs/agent.md, "The store").
 */
export async function lateTempsAtExit(owner: object): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const bound = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, LATE_LOOK.atShutdownMs);
  });
  try {
    await exitWaitsEnded(bound);
    // What each ended wait runs (a promise chain) has run by then.
    await nextTurn();
    const byExit = atExit.get(owner);
    if (!byExit || byExit.size === 0) return;
    const run = (exited: Promise<unknown>) => () => runRemovals(byExit, exited);
    await Promise.all([...byExit.keys()].map((e) => Promise.race([e, bound]).then(run(e), run(e))));
  } finally {
    clearTimeout(timer);
  }
}
