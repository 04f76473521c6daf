import { type Release, Semaphore } from "../util/semaphore.ts";

/**
 * One running server's slot use (runtime/launch.ts): the one count of what is on its slots. How
 * many leases it carries, up to its slots, extra callers waiting in line (the supervisor's
 * acquire; the idle-sleep watch and prompt reuse's quiet save read the count), and which
 * session each of llama-server's slots holds (docs/agent.md#prompt-reuse, slot affinity). A
 * session keeps its slot while it is active; a session without one takes a free slot, an empty
 * one first, else the least recently used, whose holder gives way, its state saved first when it
 * changed since its last save (`evict`). An idle sleep empties every slot (`emptied`), the leases
 * stay. No I/O: the orchestration is agent/kv/reuse.ts, which asks through these methods only.
 */

interface SlotState {
  /** The session whose prompt the slot holds (`user/session`); none when empty or unknown. */
  holder: string | undefined;
  /**
   * The sessions whose tokens may still be in the slot though it was handed to `holder`: until
   * llama-server takes up a request of the holder's, the slot keeps what it held (a turn
   * cancelled or refused before that leaves them there), or what its RAM cache brought back for a
   * refused request (b10587 `get_available_slot` loads the best cached match as it picks the
   * slot: the holder's own prompt, which its next hand-over must not drop); the next request
   * hands them to the RAM cache. An erase of any of them empties the slot.
   */
  priors: Set<string>;
  /**
   * Those of `priors` a restore that did not answer may still load (`mayHold`): an erase sent now
   * can run before it, so the first erase of one leaves it among `priors` for the next check.
   */
  late: Set<string>;
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

export class SlotUse {
  private readonly slots: SlotState[];
  /** The leases' line: FIFO and abort-aware (util/semaphore.ts), as many at once as slots. */
  private readonly gate = new Semaphore(() => this.slots.length);
  private readonly held: Release[] = [];

  constructor(count: number) {
    this.slots = Array.from({ length: Math.max(1, count) }, () => ({
      holder: undefined,
      priors: new Set(),
      late: new Set(),
      dirty: false,
      busy: false,
      lastUsed: -1,
      work: undefined,
    }));
  }

  /** Its slots, as planned (`-np`). */
  get total(): number {
    return this.slots.length;
  }

  /** Leases on this server now. */
  get leases(): number {
    return this.held.length;
  }

  /** Callers waiting in line for a lease. */
  get waiting(): number {
    return this.gate.waiting;
  }

  /**
   * A lease lands on this server, once a slot is free and those before it are served; rejects
   * with `signal`'s reason, or the reason given to `failWaiters`.
   */
  async enter(signal: AbortSignal): Promise<void> {
    this.held.push(await this.gate.acquire(signal));
  }

  /** A lease left it; false when none was counted (never below zero). */
  leave(): boolean {
    const release = this.held.pop();
    if (!release) return false;
    release();
    return true;
  }

  /** The server is gone: every caller still in line is answered `err`. */
  failWaiters(err: unknown): void {
    this.gate.failWaiters(err);
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

  /**
   * The turn is over: the slot holds its session, changed unless nothing was sent; what it held
   * before is replaced once llama-server took up a request (`started`). Until then its tokens are
   * still the prior's: not this session's to save (a file named for it that a delete of the prior
   * would never find), so the slot is not changed by a request refused or failed first.
   */
  release(slot: number, key: string, sent: boolean, now: number, started = sent): void {
    const s = this.slots[slot];
    if (!s) return;
    s.busy = false;
    s.holder = key;
    if (started) {
      s.priors.clear();
      s.late.clear();
    }
    s.dirty ||= sent && s.priors.size === 0;
    s.lastUsed = now;
  }

  /** A take whose turn never ran (its restore failed): the slot is free again, its holder as it was. */
  abandon(slot: number): void {
    const s = this.slots[slot];
    if (s) s.busy = false;
  }

  /** From now on the slot is `key`'s, unchanged since saved (whatever a restore makes of it). */
  handTo(slot: number, key: string): void {
    const s = this.slots[slot];
    if (!s) return;
    // Tokens of a holder whose requests were never taken up may still be those before it.
    if (s.holder !== undefined) s.priors.add(s.holder);
    s.priors.delete(key);
    s.late.delete(key);
    s.holder = key;
    s.dirty = false;
  }

  /**
   * The holder's saved state was restored into the slot: nothing of the prior's is left there, and
   * the next hand-over names the holder as the one whose tokens it holds (an erase of it empties it);
   * but what a late restore may load after it (`late`).
   */
  restored(slot: number): void {
    const s = this.slots[slot];
    if (s) s.priors = new Set(s.late);
  }

  /**
   * An erase of the slot is queued behind all that llama-server was asked for it (a restore that
   * did not answer: agent/kv/slot-clear.ts): it holds nothing, of the holder or before it, but
   * what an earlier restore still queued may load after it (`late`).
   */
  cleared(slot: number): void {
    const s = this.slots[slot];
    if (!s) return;
    s.holder = undefined;
    s.priors = new Set(s.late);
    s.dirty = false;
  }

  /**
   * `key`'s tokens may be in the slot though its holder is no one's: a restore of `key` that did
   * not answer, the erase behind it answered first (llama-server can run a deferred slot action
   * after a later one, agent/kv/slot-clear.ts), and a delete of `key` must empty it still. Still
   * queued, it may also run after that delete's own erase: the slot then counts as holding it
   * until one more (`late`), the check when another session takes it.
   */
  mayHold(slot: number, key: string): void {
    this.slots[slot]?.priors.add(key);
    this.slots[slot]?.late.add(key);
  }

  holderOf(slot: number): string | undefined {
    return this.slots[slot]?.holder;
  }

  /** The sessions whose tokens the slot may hold: its holder and its `priors`. */
  sessionsIn(slot: number): string[] {
    const s = this.slots[slot];
    return s ? [...(s.holder === undefined ? [] : [s.holder]), ...s.priors] : [];
  }

  /** The save or restore under way on the slot; a turn waits for it before its request. */
  workOn(slot: number): Promise<void> | undefined {
    return this.slots[slot]?.work;
  }

  /** `work` is under way on the slot until it settles. */
  working(slot: number, work: Promise<void>): void {
    const s = this.slots[slot];
    if (!s) return;
    const tracked = work.finally(() => {
      if (s.work === tracked) s.work = undefined;
    });
    s.work = tracked;
  }

  /**
   * A save of `holder`'s state from the slot begins: true (and the slot counts as saved) when the
   * slot still holds it and it changed; false: nothing to save. Only the turn that took the slot
   * (`evicting`, before its own request) saves it while busy: a quiet save that came to it after a
   * turn of its session took it would save a state mid-turn, which no record describes.
   */
  beginSave(slot: number, holder: string, evicting = false): boolean {
    const s = this.slots[slot];
    if (!s || s.holder !== holder || !s.dirty || (s.busy && !evicting)) return false;
    s.dirty = false;
    return true;
  }

  /** That save failed: still changed, if the slot still holds it. */
  saveFailed(slot: number, holder: string): void {
    const s = this.slots[slot];
    if (s) s.dirty = s.holder === holder;
  }

  /** Slots whose state changed since it was saved, with their holders (free ones only). */
  dirty(): { slot: number; holder: string }[] {
    return this.slots.flatMap((s, slot) =>
      s.dirty && !s.busy && s.holder !== undefined ? [{ slot, holder: s.holder }] : [],
    );
  }

  /** No lease is on the server and no turn is using any slot. */
  idle(): boolean {
    return this.held.length === 0 && this.slots.every((s) => !s.busy);
  }

  /**
   * A session erased: its slots no longer count as its (their tokens are never saved); those
   * slots, and those another session took that still hold its tokens (`priors`). Not `holders`
   * (an edit: the slot it holds has the edited prompt): only the latter.
   */
  forget(matches: (holder: string) => boolean, holders = true): number[] {
    const held: number[] = [];
    this.slots.forEach((s, slot) => {
      // Emptied in llama-server: nothing of any of them is left there.
      const prior = [...s.priors].some(matches);
      if (prior) {
        // What a late restore may load after this erase stays, a matching one for one more (`late`).
        s.priors = new Set(s.late);
        for (const k of s.late) if (matches(k)) s.late.delete(k);
      }
      if (holders && s.holder !== undefined && matches(s.holder)) {
        s.holder = undefined;
        s.dirty = false;
      } else if (!prior) return;
      held.push(slot);
    });
    return held;
  }

  /** The server emptied every slot (an idle sleep): nothing is known to be in any of them. */
  emptied(): void {
    for (const s of this.slots) {
      s.holder = undefined;
      s.priors.clear();
      s.late.clear();
      s.dirty = false;
      s.lastUsed = -1;
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
