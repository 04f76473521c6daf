import { type PromptRecord, quotingNotes } from "./prompt-record.ts";

/**
 * The saves and turns of prompt reuse under way (docs/agent.md#prompt-reuse): an erase that
 * lands while one runs (sessions.delete, documents.delete) marks it, and what it would keep —
 * a saved state, a turn's prompt record — is not kept, since it holds what was erased. A turn
 * may have recalled a note of what went after the erase looked at the records: its record,
 * when it ends, is checked against the sources erased meanwhile.
 */

export interface Work {
  readonly holder: string;
  erased: boolean;
  /** Sources of its user's notes erased while it ran. */
  readonly sources: Set<string>;
}

export class UnderWay {
  private readonly all = new Set<Work>();

  begin(holder: string): Work {
    const work = { holder, erased: false, sources: new Set<string>() };
    this.all.add(work);
    return work;
  }

  /** Over: whether an erase came meanwhile that `record` (a turn's, when it ends) holds. */
  end(work: Work, record?: PromptRecord): boolean {
    this.all.delete(work);
    if (work.erased || !record) return work.erased;
    return quotingNotes(record).some((n) => n.sources.some((s) => work.sources.has(s)));
  }

  /** The sessions (key texts) with a save or turn under way. */
  holders(): string[] {
    return [...this.all].map((w) => w.holder);
  }

  /** What `gone` picks is erased; with `source`, what of `prefix`'s (a user's) quotes it too. */
  erase(gone: (holder: string) => boolean, prefix: string, source: string | undefined): void {
    for (const work of this.all) {
      if (gone(work.holder)) work.erased = true;
      else if (source && work.holder.startsWith(prefix)) work.sources.add(source);
    }
  }
}
