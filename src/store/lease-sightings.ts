import { type spaceRelation, writtenRelation } from "../platform/pid-space.ts";

/**
 * Where a lease's owner (`<pid>:<hex>@<pid space>`) was taken (store/session-lease.ts). "other":
 * pids not ours to judge, its process unseen from here, nor its row's end read on our clock:
 * waited out as a frozen holder is, its row unchanged for a TTL on our monotonic clock
 * (`LeaseSightings`), then the grace. "previous_boot": this host before a reboot, gone, its pid
 * another process now: its row's end read on our clock as a live pid's is. Only a row last
 * renewed (its end less `ttlMs`) before this boot began (`bootMs`) is a previous boot's
 * (platform/pid-space.ts `writtenRelation`): one renewed since is another machine of this host's
 * name, whose clock behind ours made its live row read as run out, taken, two cores on one
 * conversation. An owner without a space (an earlier version's) is judged by its pid.
 */
export function ownerSpace(
  row: { owner: string; expires_at: number },
  space: string,
  ttlMs: number,
  bootMs: number,
): ReturnType<typeof spaceRelation> {
  const at = row.owner.lastIndexOf("@");
  return at < 0 ? "own" : writtenRelation(row.owner.slice(at + 1), space, row.expires_at - ttlMs, bootMs);
}

/**
 * How long this core has seen another pid space's lease row unchanged, on its own monotonic clock
 * (store/session-lease.ts). That row's `expires_at` was written by another machine's wall clock:
 * one behind ours by more than a TTL writes rows that read as run out at once, one ahead rows
 * that read as live long after its holder froze. Its holder renews every 10 s, each renewal a new
 * value: a row whose value stood still for a TTL here is a frozen or gone holder's, whatever either
 * clock reads (docs/agent.md, "Two cores on one data folder").
 */
export class LeaseSightings {
  /** `moving`: its value had changed at its last look (a file being written), its time restarted. */
  private readonly seen = new Map<string, { value: string; at: number; moving: boolean }>();

  /**
   * `keepTimed`: at the bound a newcomer goes untimed (0) instead of the least lately looked at
   * being forgotten. A sweep that looks at each of more keys than the bound in turn (kv-temps.ts)
   * forgot each before it came round again, none ever timed; kept, the timed ones run out and
   * go (`forget`), making room.
   */
  constructor(private readonly keepTimed = false) {}

  /** At most this many sessions' rows remembered, the least lately looked at forgotten (seen afresh, waited longer). */
  static readonly MAX = 256;

  /** How long (ms, on `mono`) the row `row` of `key` has stood as it is now: 0 when first seen so. */
  unchangedFor(key: string, row: { owner: string; expires_at: number }, mono: number): number {
    const value = `${row.owner}\0${row.expires_at}`;
    const was = this.seen.get(key);
    this.seen.delete(key);
    if (was?.value === value) {
      // Put last again: the bound drops the least lately looked at, never a row being waited on.
      // Standing still now, being timed: no longer one to give way (`makeRoom`).
      this.seen.set(key, { ...was, moving: false });
      return mono - was.at;
    }
    if (this.seen.size >= LeaseSightings.MAX && !this.makeRoom()) return 0;
    this.seen.set(key, { value, at: mono, moving: was !== undefined });
    return 0;
  }

  /**
   * Room for one more: the least lately looked at forgotten; with `keepTimed`, one that was
   * changing at its last look (a temp another writer keeps writing: its time restarts at each
   * change anyway), never one standing still, being timed. Kept, those changing held every
   * slot, and new temps went only by the one-day rule. False: no room.
   */
  private makeRoom(): boolean {
    if (!this.keepTimed) return this.seen.delete(this.seen.keys().next().value as string);
    for (const [key, s] of this.seen) if (s.moving) return this.seen.delete(key);
    return false;
  }

  /** The session's row is taken, gone or this core's: nothing of another holder to time. */
  forget(key: string): void {
    this.seen.delete(key);
  }

  /** Forgets each key `gone` says is no longer there (a temp removed by another core or by hand). */
  forgetWhere(gone: (key: string) => boolean): void {
    for (const key of this.seen.keys()) if (gone(key)) this.seen.delete(key);
  }
}
