import type { Database } from "bun:sqlite";
import { randomBytes } from "node:crypto";
import { pidAlive } from "../platform/pid-alive.ts";
import { bootStartedAt, pidSpace } from "../platform/pid-space.ts";
import { abortable } from "../util/abortable.ts";
import { logger } from "../util/logger.ts";
import { editedSince } from "./erasures.ts";
import { LeaseSightings, ownerSpace } from "./lease-sightings.ts";
import { sameHolder } from "./turn-mark.ts";

/**
 * One turn at a time per session across processes (two app windows, an app and a CLI on one
 * data folder): a row in `session_leases` names the holder. Within a process the session locks
 * (store/keyed-mutex.ts) already queue turns; this is the line between processes. A holder
 * renews its row while the turn runs; a row whose process is gone, or that was not renewed in
 * time (a frozen or rebooted-away process, a recycled pid), is taken over.
 */
export const LEASE_TTL_MS = 30_000;
const RENEW_MS = 10_000;
const POLL_MS = 50;
/**
 * How long a lease run out whose holder's process lives must be seen so, this core's polls
 * writing meanwhile, before it is taken. Another process holding the database's lock past the
 * TTL (a long erase) refuses the holder's renewals too; the holder retries every POLL_MS, so once
 * the lock frees it renews well within this, and only a frozen holder is taken over.
 */
export const TAKEOVER_GRACE_MS = 1000;
/** How long the database's lock may stay busy before taking a lease fails (Store.write's wait). */
export const LEASE_BUSY_WAIT_MS = 5000;
/**
 * How often a holder compares the wall clock with the monotonic one, and the jump of the wall
 * clock past it that has it renew at once: after a system suspend (the monotonic clock stands
 * still meanwhile) its lease looks run out, and its next renewal is up to RENEW_MS away, well
 * past a waiting core's grace; after a step back (NTP), a waiting core counts its row, further
 * ahead than a TTL (and this much), as run out.
 */
const JUMP_CHECK_MS = 250;
const JUMP_MS = 1000;

/** A session's lease, and what the work run in the same transaction as its taking made. */
export interface Leased<T> {
  release: () => void;
  value: T;
}

export interface LeaseOptions {
  /** The wall clock, for `expires_at` (the row other processes read); `Date.now` by default. */
  now?: () => number;
  /**
   * The monotonic clock, for the takeover grace and the busy wait; `performance.now` by default.
   * A suspend (a laptop's lid closed) stops it: a waiting core does not count it as time it saw
   * the holder's lease run out, which the holder could not renew meanwhile.
   */
  mono?: () => number;
  /** Whether a process is alive; `pidAlive` by default (a zombie is not). */
  alive?: (pid: number) => boolean;
  /** Which processes a pid names here (platform/pid-space.ts `pidSpace`, asked each time, by default). */
  space?: string | (() => string);
  /** When this boot began on `now`'s clock (platform/pid-space.ts `bootStartedAt`, by default). */
  bootAt?: () => number;
}

/** A row's owner whose id (`<pid>:<hex>@`, the parameter) is this holder's, whatever space it names. */
const BY_ID = "instr(owner, ?) = 1";

/** Whether a lease's holder runs (a zombie does not): platform/pid-alive.ts. */
export { pidAlive as processAlive };

export class SessionLeases {
  /** `<pid>:<hex>`: the pid alone would not tell two stores of one process apart. */
  private readonly id: string;
  /** pidSpace(), asked each time: kept once read whole, no read on a warm turn's way. */
  private readonly space: () => string;
  private readonly now: () => number;
  private readonly mono: () => number;
  private readonly alive: (pid: number) => boolean;
  private readonly bootAt: () => number;
  private readonly sightings = new LeaseSightings();

  constructor(
    private readonly db: Database,
    options: LeaseOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.mono = options.mono ?? (() => performance.now());
    this.alive = options.alive ?? ((pid) => pidAlive(pid));
    const space = options.space ?? pidSpace;
    this.space = typeof space === "string" ? () => space : space;
    this.bootAt = options.bootAt ?? bootStartedAt;
    this.id = `${process.pid}:${randomBytes(6).toString("hex")}`;
  }

  /**
   * This holder's name as its rows are written: its id and its pid space (lease-sightings.ts
   * `ownerSpace`), which tells another core whether the pid is one it can judge. The space as it
   * is now: taken once, a partial one (the boot's id not read at start-up) named this core's rows
   * another machine's to its own pid space's cores for its life. A row is this holder's by its id
   * (`sameHolder`).
   */
  get owner(): string {
    return `${this.id}@${this.space()}`;
  }

  /**
   * Waits until this process holds the session, and runs `within` in the transaction that takes
   * it: a turn reads its session and writes its first checkpoint in the same write as its lease
   * (docs/performance.md, "The session in one write"). A live holder is waited for as long as it
   * holds it; a database locked by another process only up to `busyWaitMs`, then the SQLite
   * error is thrown (the caller names the file). What `within` throws undoes the lease with the
   * rest, and is thrown as it is.
   */
  async acquire<T>(
    userId: string,
    sessionId: string,
    signal: AbortSignal,
    within: () => T,
    busyWaitMs = LEASE_BUSY_WAIT_MS,
  ): Promise<Leased<T>> {
    return (await this.take(userId, sessionId, signal, within, busyWaitMs, true)) as Leased<T>;
  }

  /**
   * As `acquire`, but undefined at once, nothing run, when a live holder has the session (one
   * whose lease ran out is given its grace first, as `acquire` gives it).
   */
  tryHold<T>(
    userId: string,
    sessionId: string,
    signal: AbortSignal,
    within: () => T,
    busyWaitMs = LEASE_BUSY_WAIT_MS,
  ): Promise<Leased<T> | undefined> {
    return this.take(userId, sessionId, signal, within, busyWaitMs, false);
  }

  private async take<T>(
    userId: string,
    sessionId: string,
    signal: AbortSignal,
    within: () => T,
    busyWaitMs: number,
    waitForHolder: boolean,
  ): Promise<Leased<T> | undefined> {
    let busySince: number | undefined;
    // How long this core has seen the lease run out with its holder alive, counting only the time
    // up to a poll that could write (the holder's renewals could too), and the last poll since.
    // A busy poll pauses it rather than starting it again: another core's short writes now and
    // then would otherwise keep a frozen holder's session from ever being taken. The time from a
    // busy poll to a writable one counts, as one poll's: a lock busy at every other poll (another
    // core's indexing, as long free as held) would otherwise count nothing, and one held long
    // counts no more than a poll's time once it frees, the holder retrying as often.
    // Both on the monotonic clock: a suspend between two polls counts nothing (`mono`). Where
    // that clock goes on through one (Windows' QueryPerformanceCounter), or this core did not
    // run, a gap between two polls longer than the grace counts as one poll's: the holder, asleep
    // as long, is given the grace once awake.
    let staleFor = 0;
    let staleAt: number | undefined;
    for (;;) {
      signal.throwIfAborted();
      const now = this.now(); // read before the lock: a renewal meanwhile only looks fresher
      const mono = this.mono();
      const gap = staleAt === undefined ? 0 : mono - staleAt;
      const seen = staleFor + (gap > TAKEOVER_GRACE_MS ? POLL_MS : gap);
      const r = this.attempt(userId, sessionId, within, now, mono, seen);
      if (r instanceof Error) {
        busySince ??= mono;
        if (mono - busySince >= busyWaitMs) throw r;
        // The holder's renewals may be refused as this poll was: the time up to it is not counted.
        if (staleAt !== undefined) staleAt = mono;
      } else if (typeof r === "object") return { release: this.held(userId, sessionId), value: r.value };
      else if (r === "held" && !waitForHolder) return undefined;
      else {
        busySince = undefined;
        [staleFor, staleAt] = r === "stale" ? [seen, mono] : [0, undefined];
      }
      await abortable(new Promise((res) => setTimeout(res, POLL_MS)), signal);
    }
  }

  /**
   * The release of a lease just taken, which renews it until then: every RENEW_MS, and a renewal
   * refused (the database's lock busy) again every POLL_MS, to renew within a waiting core's
   * grace once the lock frees rather than up to RENEW_MS after.
   */
  private held(userId: string, sessionId: string): () => void {
    let timer: ReturnType<typeof setTimeout>;
    const renewNow = () => renewIn(this.renew(userId, sessionId) ? RENEW_MS : POLL_MS);
    const renewIn = (ms: number) => {
      clearTimeout(timer);
      timer = setTimeout(renewNow, ms);
      timer.unref?.();
    };
    renewIn(RENEW_MS);
    // The timers run on the monotonic clock: after a suspend, renewed at once rather than up to
    // RENEW_MS later, the lease run out by the wall clock meanwhile (a waiting core's grace is 1 s);
    // after a step back of the wall clock too, the row then reading as written on another clock.
    let offset = this.now() - this.mono();
    const watch = setInterval(() => {
      const was = offset;
      offset = this.now() - this.mono();
      if (Math.abs(offset - was) >= JUMP_MS) renewNow();
    }, JUMP_CHECK_MS);
    watch.unref?.();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      clearTimeout(timer);
      clearInterval(watch);
      // Never thrown: a full or read-only disk, or another process's lock, refuses this DELETE
      // too, and its throw would hide the turn's own error and skip the release of the session's
      // lock in this process (its every later chat waiting forever). A row left behind is this
      // holder's, taken again by its next turn at once, and by another process once it expires.
      try {
        this.db
          .query(`DELETE FROM session_leases WHERE user_id = ? AND session_id = ? AND ${BY_ID}`)
          .run(userId, sessionId, `${this.id}@`);
      } catch (err) {
        logger.warn(
          `the lease of session ${sessionId} was not released (it expires): ${(err as Error).message}`,
        );
      }
    };
  }

  /**
   * Whether the session is stored, no other holder's row names it (live or not: it took the
   * session over, so a KV slot's turn of it here is older), and, given `since` (an erase mark), no
   * edit erased its tail after it, whichever core made it (store/erasures.ts `editedSince`): a KV
   * slot's state of it is then older than the session (agent/kv/reuse.ts) and is not used or
   * kept. The row, the lease's owner and the newest erase's number in one query, on each warm
   * chat's way (docs/performance.md, "The core's own path against 2026-12-05's build"); the erase
   * checks' own lookups only when an erase came after `since`.
   */
  keptHere(userId: string, sessionId: string, since?: number): boolean {
    const row = this.db
      .query(
        `SELECT EXISTS (SELECT 1 FROM sessions WHERE user_id = ?1 AND session_id = ?2) AS stored,
           (SELECT owner FROM session_leases WHERE user_id = ?1 AND session_id = ?2) AS owner,
           (SELECT seq FROM sqlite_sequence WHERE name = 'erasures') AS mark`,
      )
      .get(userId, sessionId) as { stored: number; owner: string | null; mark: number | null };
    if (!row.stored || (row.owner !== null && !sameHolder(row.owner, this.id))) return false;
    if (since === undefined || (row.mark ?? 0) <= since) return true;
    return !editedSince(this.db, userId, sessionId, since);
  }

  /**
   * Whether this holder's row names the session: not once another core took it over (even if it
   * released it since) or an erase removed it. A turn that failed so leaves its KV slot unsaved.
   */
  holds(userId: string, sessionId: string): boolean {
    const row = this.db
      .query("SELECT owner FROM session_leases WHERE user_id = ? AND session_id = ?")
      .get(userId, sessionId) as { owner: string } | null;
    return row !== null && sameHolder(row.owner, this.id);
  }

  /** Takes the session when it is free, or its holder is gone; false when a live one has it (run out or not). */
  tryTake(userId: string, sessionId: string): boolean {
    return typeof this.attempt(userId, sessionId, () => undefined, this.now(), this.mono()) === "object";
  }

  /**
   * Taken (with `within`'s value), held by a live holder, run out with its holder alive and
   * `staleFor` (seen so) short of the grace ("stale"), or the database's lock busy (the error).
   */
  private attempt<T>(
    userId: string,
    sessionId: string,
    within: () => T,
    now: number,
    mono: number,
    staleFor = 0,
  ): { value: T } | "held" | "stale" | Error {
    try {
      return this.takeNow(userId, sessionId, within, now, mono, staleFor);
    } catch (err) {
      // Another process is writing: the next poll asks again.
      if (/^SQLITE_BUSY/.test((err as { code?: string }).code ?? "")) return err as Error;
      throw err;
    }
  }

  private takeNow<T>(
    userId: string,
    sessionId: string,
    within: () => T,
    now: number,
    mono: number,
    staleFor: number,
  ): { value: T } | "held" | "stale" {
    const key = `${userId}\0${sessionId}`;
    return this.db
      .transaction((): { value: T } | "held" | "stale" => {
        const held = this.db
          .query("SELECT owner, pid, expires_at FROM session_leases WHERE user_id = ? AND session_id = ?")
          .get(userId, sessionId) as { owner: string; pid: number; expires_at: number } | null;
        const where = held === null ? "own" : ownerSpace(held, this.space(), LEASE_TTL_MS, this.bootAt());
        const foreign = where === "other";
        if (held && !sameHolder(held.owner, this.id) && (where !== "own" || this.alive(held.pid))) {
          // A row further ahead than a TTL was written before the wall clock stepped back (NTP):
          // run out, not live for the step too (a frozen holder's, for hours); a live one renews.
          // Another pid space's row was written by another machine's clock: timed on ours instead
          // (store/lease-sightings.ts), live until its value stood still for a TTL here.
          const ahead = held.expires_at - now;
          if (
            foreign
              ? this.sightings.unchangedFor(key, held, mono) < LEASE_TTL_MS
              : ahead > 0 && ahead <= LEASE_TTL_MS + JUMP_MS
          )
            return "held";
          if (staleFor < TAKEOVER_GRACE_MS) return "stale";
        }
        this.sightings.forget(key);
        this.db
          .query(
            `INSERT OR REPLACE INTO session_leases (user_id, session_id, owner, pid, expires_at)
             VALUES (?, ?, ?, ?, ?)`,
          )
          .run(userId, sessionId, this.owner, process.pid, now + LEASE_TTL_MS);
        return { value: within() };
      })
      .immediate();
  }

  /**
   * Whether the renewal was written; never thrown (the database's lock busy: tried again soon),
   * not even from a database closed under the lease (a store dropped mid-turn): from its timer,
   * the core would take it for an uncaught fault and stop. Asked without SQLite's busy wait: a
   * refused renewal is asked again a poll later, and with the wait each try held the main loop
   * up to 20 ms of every ~70, per lease, for as long as another process held the lock. At once,
   * it still lands in the lock's first free moment well within a waiting core's grace, which
   * needs a second of its own polls that could write.
   */
  private renew(userId: string, sessionId: string): boolean {
    let timeout: number | undefined;
    try {
      ({ timeout } = this.db.query("PRAGMA busy_timeout").get() as { timeout: number });
      this.db.run("PRAGMA busy_timeout = 0");
      this.db
        .query(
          `UPDATE session_leases SET expires_at = ?, owner = ? WHERE user_id = ? AND session_id = ? AND ${BY_ID}`,
        )
        .run(this.now() + LEASE_TTL_MS, this.owner, userId, sessionId, `${this.id}@`);
      return true;
    } catch {
      return false;
    } finally {
      if (timeout !== undefined) this.db.run(`PRAGMA busy_timeout = ${timeout}`);
    }
  }
}
