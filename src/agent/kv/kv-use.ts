import { lstatSync } from "node:fs";
import { join } from "node:path";

/** Our names (kv-disk.ts `nameOf`): anything else in the folder is not ours to count or remove. */
export const OWN_FILE = /^(s-[0-9a-f]{32})\.(bin|json)$/;

export interface KvUse {
  bytes: number;
  files: number;
}

/** The sizes of a few sessions' files before this core changes them (`KvUseCount.before`). */
export type UseMark = { use: KvUse; files: string[] } | undefined;

/**
 * What the saved states take (`status`, the budget): the folder counted (a stat a file) at each
 * save (`forget`: another core's states count against the budget too), and kept by this core's
 * other changes, a session's two files each. Counted again after every change, a folder of
 * thousands was stat'ed whole on the main loop at the next `status`, which hosts ask often.
 */
export class KvUseCount {
  private use: KvUse | undefined;

  constructor(private readonly dir: string) {}

  get(listing: () => string[]): KvUse {
    if (this.use) return this.use;
    const use = { bytes: 0, files: 0 };
    for (const f of listing()) if (OWN_FILE.test(f)) this.add(use, f, 1);
    this.use = use;
    return use;
  }

  /** Counted afresh when next asked. */
  forget(): void {
    this.use = undefined;
  }

  /** Before the files of `names` change: their sizes taken out of the count, put back by `after`. */
  before(names: readonly string[]): UseMark {
    const use = this.use;
    if (!use) return undefined;
    const files = [...new Set(names)].flatMap((n) => [`${n}.bin`, `${n}.json`]);
    for (const f of files) this.add(use, f, -1);
    return { use, files };
  }

  after(mark: UseMark): void {
    if (mark) for (const f of mark.files) this.add(mark.use, f, 1);
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

  private add(use: KvUse, f: string, sign: 1 | -1): void {
    try {
      const st = lstatSync(join(this.dir, f));
      if (!st.isFile()) return;
      use.bytes += sign * st.size;
      if (f.endsWith(".bin")) use.files += sign;
    } catch {}
  }
}
