import { lstatSync } from "node:fs";
import { join } from "node:path";
import { nextTurn } from "../../util/next-turn.ts";

/** Our names (kv-disk.ts `nameOf`): anything else in the folder is not ours to count or remove. */
export const OWN_FILE = /^(s-[0-9a-f]{32})\.(bin|json)$/;

export interface KvUse {
  bytes: number;
  files: number;
}

/** What is counted: each file's size, and their sums. */
type Tally = { sizes: Map<string, number>; bytes: number; files: number };

/** The files of a few sessions about to change (`KvUseCount.before`), and the count they change. */
type UseMark = { tally: Tally; files: string[] } | undefined;

/**
 * Files a count (`KvUseCount.recount`: a save's, the first `status`'s) stats a turn of the loop:
 * stat'ed all at once, a shared folder of 10^5 files (or one planted full) held ping at every
 * save. Lowered in tests.
 */
export const COUNT_PASS = { max: 256 };

/**
 * What the saved states take (`status`, the budget): the folder counted (a stat a file) at each
 * save (`recount`: another core's states count against the budget too), `COUNT_PASS.max` files a
 * turn of the loop, and kept by this core's other changes, a session's two files each. Counted
 * again after every change, a folder of thousands was stat'ed whole on the main loop at the next
 * `status`, which hosts ask often; the first `status` before any save did the same (`get`). Each
 * file's size is kept as counted: a change takes out what was counted of it, not what a stat finds
 * then (another core's state, never counted here, removed took the count below zero; one the
 * other core had removed stayed in it). Another core's changes show at this core's next save.
 */
export class KvUseCount {
  private tally: Tally | undefined;
  /** Per count under way (`recount`), the files this core changed meanwhile: stat'ed again at its end. */
  private readonly counting = new Set<Set<string>>();
  /** The count under way, if any: a count asked meanwhile waits for it, the folder listed once. */
  private running: Promise<void> | undefined;
  /** The count to start once `running` ends, for the asks (`recount`) that came during it. */
  private next: Promise<void> | undefined;

  constructor(private readonly dir: string) {}

  /**
   * The count; null until one is done. The first ask starts it (`recount`, sliced): counted in one
   * go, a folder of thousands of states held ping at the first `status` after a start.
   */
  get(listing: () => string[]): KvUse | null {
    // A count that failed counted nothing: the next ask starts another.
    // Any count will do here, the one under way too: it lists the folder no second time.
    if (!this.tally) (this.running ?? this.next ?? this.start(listing)).catch(() => undefined);
    return this.tally ? this.now() : null;
  }

  /** The count as kept; none yet is an empty folder's (the budget asks it after its `recount`). */
  now(): KvUse {
    return { bytes: this.tally?.bytes ?? 0, files: this.tally?.files ?? 0 };
  }

  /**
   * The folder as `listing` names it counted afresh, `COUNT_PASS.max` files a turn of the loop, in
   * place of the count once done (kept by this core's changes until then, and those made meanwhile
   * stat'ed again at the end). Its listing is taken now or later: a count under way listed the
   * folder before the ask, so another core's state renamed into place since (its own budget pass
   * done before this save's file landed) was in neither count, the folder left over the budget. It
   * is waited for, then one count follows for all that asked meanwhile: one at a time (two at once,
   * the first `status`'s and a save's, listed and stat'ed a folder of thousands twice).
   */
  recount(listing: () => string[]): Promise<void> {
    if (this.next) return this.next;
    if (!this.running) return this.start(listing);
    const next = this.running
      .catch(() => undefined)
      .then(() => {
        this.next = undefined;
        return this.start(listing);
      });
    this.next = next;
    return next;
  }

  private start(listing: () => string[]): Promise<void> {
    const run = this.count(listing()).finally(() => {
      if (this.running === run) this.running = undefined;
    });
    this.running = run;
    return run;
  }

  private async count(listing: readonly string[]): Promise<void> {
    const changed = new Set<string>();
    this.counting.add(changed);
    try {
      const tally = empty();
      const own = listing.filter((f) => OWN_FILE.test(f));
      for (let i = 0; i < own.length; i += COUNT_PASS.max) {
        if (i > 0) await nextTurn();
        for (const f of own.slice(i, i + COUNT_PASS.max)) this.set(tally, f);
      }
      for (const f of changed) this.set(tally, f);
      this.tally = tally;
    } finally {
      this.counting.delete(changed);
    }
  }

  /** Before the files of `names` change: what is counted of them is put right by `after`. */
  private before(names: readonly string[]): UseMark {
    const files = [...new Set(names)].flatMap((n) => [`${n}.bin`, `${n}.json`]);
    for (const changed of this.counting) for (const f of files) changed.add(f);
    return this.tally && { tally: this.tally, files };
  }

  private after(mark: UseMark): void {
    // Counted afresh meanwhile: nothing to put right.
    if (!mark || mark.tally !== this.tally) return;
    for (const f of mark.files) this.set(mark.tally, f);
  }

  /** The files of `names` counted as a stat finds them now (changed by another core, say). */
  restat(names: readonly string[]): void {
    this.after(this.before(names));
  }

  /** Runs `act`, which changes the files of `names` only, the count kept. */
  around<T>(names: readonly string[], act: () => T): T {
    const mark = this.before(names);
    try {
      return act();
    } finally {
      this.after(mark);
    }
  }

  /** `f`'s size as a stat finds it now, in place of what was counted of it (none: not there, not a file). */
  private set(tally: Tally, f: string): void {
    const was = tally.sizes.get(f);
    if (was !== undefined) {
      tally.bytes -= was;
      if (f.endsWith(".bin")) tally.files -= 1;
      tally.sizes.delete(f);
    }
    try {
      const st = lstatSync(join(this.dir, f));
      if (!st.isFile()) return;
      tally.sizes.set(f, st.size);
      tally.bytes += st.size;
      if (f.endsWith(".bin")) tally.files += 1;
    } catch {}
  }
}

const empty = (): Tally => ({ sizes: new Map(), bytes: 0, files: 0 });
