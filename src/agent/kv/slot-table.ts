/**
 * Which session each of llama-server's slots holds (docs/agent.md#prompt-reuse, slot affinity), for
 * one running server between two losses of its slots (a restart, an idle sleep). A session keeps
 * its slot while it is active; a session without one takes a free slot, an empty one first, else
 * the least recently used, whose holder gives way, its state saved first when it changed since its
 * last save (`evict`). Pure: the orchestration is reuse.ts.
 */

export interface SlotState {
  /** The session whose prompt the slot holds (`user/session`); none when empty or unknown. */
  holder: string | undefined;
  /** It changed since it was last saved: a turn ran in it. */
  dirty: boolean;
  /** A turn is using it. */
  busy: boolean;
  lastUsed: number;
  /** A save or restore under way on it: a turn waits for it before its own request. */
  work: Promise<void> | undefined;
}

export interface Pick {
  slot: number;
  /** The slot holds this session already: nothing to restore. */
  holds: boolean;
  /** A session to save out of the slot first (it changed since its last save). */
  evict: string | undefined;
}

export class SlotTable {
  readonly slots: SlotState[];

  constructor(count: number) {
    this.slots = Array.from({ length: Math.max(1, count) }, () => ({
      holder: undefined,
      dirty: false,
      busy: false,
      lastUsed: -1,
      work: undefined,
    }));
  }

  /** The slot a session's turn runs in, marked busy; undefined when every slot is in use. */
  take(key: string, now: number): Pick | undefined {
    const own = this.slots.findIndex((s) => s.holder === key && !s.busy);
    if (own >= 0) return this.claim(own, key, now, true);
    const free = this.slots.map((s, i) => ({ s, i })).filter(({ s }) => !s.busy);
    if (free.length === 0) return undefined;
    const empty = free.find(({ s }) => s.holder === undefined);
    const lru = free.reduce((a, b) => (b.s.lastUsed < a.s.lastUsed ? b : a));
    return this.claim((empty ?? lru).i, key, now, false);
  }

  /** The turn is over: the slot holds its session, changed unless nothing was sent. */
  release(slot: number, key: string, sent: boolean, now: number): void {
    const s = this.slots[slot];
    if (!s) return;
    s.busy = false;
    s.holder = key;
    s.dirty ||= sent;
    s.lastUsed = now;
  }

  /** Slots whose state changed since it was saved, with their holders (free ones only). */
  dirty(): { slot: number; holder: string }[] {
    return this.slots.flatMap((s, slot) =>
      s.dirty && !s.busy && s.holder !== undefined ? [{ slot, holder: s.holder }] : [],
    );
  }

  /** No turn is using any slot. */
  idle(): boolean {
    return this.slots.every((s) => !s.busy);
  }

  /** A session erased: its slots no longer count as its (their tokens are never saved). */
  forget(matches: (holder: string) => boolean): void {
    for (const s of this.slots) {
      if (s.holder !== undefined && matches(s.holder)) {
        s.holder = undefined;
        s.dirty = false;
      }
    }
  }

  private claim(slot: number, key: string, now: number, holds: boolean): Pick {
    const s = this.slots[slot] as SlotState;
    const evict = !holds && s.dirty && s.holder !== undefined && s.holder !== key ? s.holder : undefined;
    s.busy = true;
    s.lastUsed = now;
    return { slot, holds, evict };
  }
}
