import { lstatSync } from "node:fs";
import { join } from "node:path";

/** Our names (kv-disk.ts `nameOf`): anything else in the folder is not ours to count or remove. */
export const OWN_FILE = /^(s-[0-9a-f]{32})\.(bin|json)$/;

export interface KvUse {
  bytes: number;
  files: number;
}

/** The files of a few sessions about to change (`KvUseCount.before`), and the count they change. */
export type UseMark = { sizes: Map<string, number>; files: string[] } | undefined;

/**
 * What the saved states take (`status`, the budget): the folder counted (a stat a file) at each
 * save (`forget`: another core's states count against the budget too), and kept by this core's
 * other changes, a session's two files each. Counted again after every change, a folder of
 * thousands was stat'ed whole on the main loop at the next `status`, which hosts ask often.
 * Each file's size is kept as counted: a change takes out what was counted of it, not what a stat
 * finds then (another core's state, never counted here, removed took the count below zero; one
 * the other core had removed stayed in it). Another core's changes show at this core's next save.
 */
export class KvUseCount {
  private sizes: Map<string, number> | undefined;
  private bytes = 0;
  private files = 0;

  constructor(private readonly dir: string) {}

  get(listing: () => string[]): KvUse {
    if (!this.sizes) {
      this.sizes = new Map();
      this.bytes = 0;
      this.files = 0;
      for (const f of listing()) if (OWN_FILE.test(f)) this.set(this.sizes, f);
    }
    return { bytes: this.bytes, files: this.files };
  }

  /** Counted afresh when next asked. */
  forget(): void {
    this.sizes = undefined;
  }

  /** Before the files of `names` change: what is counted of them is put right by `after`. */
  before(names: readonly string[]): UseMark {
    const sizes = this.sizes;
    if (!sizes) return undefined;
    return { sizes, files: [...new Set(names)].flatMap((n) => [`${n}.bin`, `${n}.json`]) };
  }

  after(mark: UseMark): void {
    // Counted afresh meanwhile: nothing to put right.
    if (!mark || mark.sizes !== this.sizes) return;
    for (const f of mark.files) this.set(mark.sizes, f);
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
  private set(sizes: Map<string, number>, f: string): void {
    const was = sizes.get(f);
    if (was !== undefined) {
      this.bytes -= was;
      if (f.endsWith(".bin")) this.files -= 1;
      sizes.delete(f);
    }
    try {
      const st = lstatSync(join(this.dir, f));
      if (!st.isFile()) return;
      sizes.set(f, st.size);
      this.bytes += st.size;
      if (f.endsWith(".bin")) this.files += 1;
    } catch {}
  }
}
