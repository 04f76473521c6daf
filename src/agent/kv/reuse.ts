import type { LlamaLease } from "../../runtime/endpoint.ts";
import type { LaunchView } from "../../runtime/launch.ts";
import type { SlotUse } from "../../runtime/slot-use.ts";
import { abortable } from "../../util/abortable.ts";
import { keepLatest } from "../../util/keep-latest.ts";
import { logger } from "../../util/logger.ts";
import { within } from "../../util/within.ts";
import { DiskUse } from "./disk-use.ts";
import { EditMarks } from "./edit-marks.ts";
import { launchFingerprinter } from "./fingerprint.ts";
import { keepAll, type Later } from "./later.ts";
import { dropSource, emptyRecord, type PromptRecord, quotedPassages, quotingNotes } from "./prompt-record.ts";
import { QuietTimer } from "./quiet-timer.ts";
import { type Looked, restorableState, restoreSlotState } from "./restore-state.ts";
import { quietDelay, type ReuseDeps, type ReusedTurn } from "./reuse-deps.ts";
import { saveSlotState } from "./save-slot.ts";
import { keyOf, keyText, type SessionKey } from "./session-key.ts";
import { clearSlots } from "./slot-clear.ts";
import { UnderWay, type Work } from "./under-way.ts";

/**
 * Prompt reuse across turns (docs/agent.md#prompt-reuse): a session keeps a slot while active
 * (`id_slot`), its prompt record (cut and notes) so every turn sends the prefix the slot holds,
 * and its KV state, saved to disk when it would be lost and restored before its next turn.
 *
 * When a save happens (docs/agent.md, "Prompt reuse" has the measured costs):
 * - once the server has been idle for `quietMs` (2 s, or a quarter of `llama.idle_sleep_s` if
 *   that is shorter): the slots that changed since their last save. That is before idle sleep,
 *   which unloads every slot, and it is the state a core that is killed, or a machine that
 *   loses power, finds again. A save is a task for llama-server, so its idle clock starts again:
 *   it sleeps `idle_sleep_s` after the save rather than after the turn;
 * - when another session takes the slot and the holder changed since its last save: kept by
 *   llama-server's RAM cache, nothing on the taking turn's path; saved to disk first (on that
 *   path: a save costs milliseconds per 1,000 tokens, a prefill of them seconds on a CPU) only
 *   without a RAM cache, or when the taking session's own state is restored over it (`handOver`);
 * - at shutdown, what changed since the last quiet save (within `STOP_SAVE_MS`).
 * Saving never delays a result: it is never on the path of the turn whose state it saves.
 * Restoring happens before a session's turn when its slot does not hold it (the server restarted
 * or slept, another session had it and the RAM cache did not take it); any failure is logged and
 * the turn processes its prompt, which is what it would have done without a file.
 */

export type { ReuseDeps, ReusedTurn };

/** Shutdown waits this long for the last saves (the host gives the whole stop a few seconds: client/shutdown-timing.ts). */
export const STOP_SAVE_MS = 2000;
const RECORDS_KEPT = 512;

/** One running server (its Launch: slot table, epoch, awake) and the fingerprint of its shape. */
interface Server {
  launch: LaunchView;
  /** Asked at each save and restore: none while its model files are not those it loaded. */
  fingerprint: () => Promise<string | undefined>;
}

export class PromptReuse {
  private readonly records = new Map<string, PromptRecord>();
  private readonly marks: EditMarks;
  /** Sessions whose state llama-server's RAM cache took when they gave way, by the server's epoch. */
  private readonly inRam = new Map<string, string>();
  private server: Server | undefined;
  private readonly quiet: QuietTimer;
  /** Saves and restores, one at a time. */
  private chain: Promise<unknown> = Promise.resolve();
  private readonly folder: DiskUse;
  private readonly now: () => number;
  private stopped = false;
  private readonly underWay = new UnderWay();

  constructor(private readonly deps: ReuseDeps) {
    this.now = deps.now ?? Date.now;
    this.folder = new DiskUse(deps.disk);
    this.marks = new EditMarks(deps, RECORDS_KEPT);
    this.quiet = new QuietTimer(quietDelay(deps), deps.quietSeen);
  }

  /** Before a turn's first request: its slot (its state restored into it when needed) and its record. */
  async begin(lease: LlamaLease, key: SessionKey, signal: AbortSignal): Promise<ReusedTurn> {
    const server = this.serverOf(lease);
    // Its model files' stats may hang (a dead network mount, 30 s): a cancel ends the wait at once.
    const fp = await abortable(server.fingerprint(), signal);
    const k = keyText(key);
    const table = server.launch.slots;
    this.unlessCurrent(key);
    const pick = table.take(k, this.now());
    const turn = this.underWay.begin(k);
    const abandon = () => {
      this.underWay.end(turn);
      if (!pick) return;
      table.abandon(pick.slot);
      this.whenQuiet(); // changes a quiet save found busy, or skipped, are still unsaved
    };
    const none = {
      slot: undefined,
      started: () => {},
      end: (r: PromptRecord | undefined) => (r ? this.ended(turn, r) : abandon()),
    };
    if (!pick) return { ...none, record: this.recordOf(key, fp), abandon };
    let looked: Looked;
    let handing: Promise<Looked> | undefined;
    try {
      const waited = table.workOn(pick.slot); // its save, or an erase emptying it (clearSlots)
      await abortable(waited ?? Promise.resolve(), signal);
      // Another core's edit during that wait: the slot and record hold the pre-edit tail.
      if (pick.holds && waited && !this.unlessCurrent(key)) pick.holds = false;
      if (!pick.holds) {
        handing = this.run(() => this.handOver(server, pick.slot, key, fp, pick.evict, signal));
        // A cancel ends the turn's wait at once (the chain ahead, the holder's save llama-server
        // may never answer); the hand-over goes on in the chain, the slot the turn's till it ends.
        looked = await abortable(handing, signal);
      }
    } catch (err) {
      if (handing && signal.aborted) void handing.then(abandon, abandon);
      else abandon();
      throw err;
    }
    let started = false;
    return {
      slot: pick.slot,
      record: this.recordOf(key, fp, looked),
      started: () => {
        started = true;
      },
      end: (r, sent, lost) => {
        if (!r) return abandon();
        table.release(pick.slot, k, sent, this.now(), started);
        this.ended(turn, r, lost);
        this.whenQuiet();
      },
      abandon,
    };
  }

  /** Another core's erase of what its notes quote (a store that cannot tell), its edit: not its slot, nor record. */
  private unlessCurrent(key: SessionKey, k = keyText(key)): boolean {
    if (this.quotable(key.userId, this.records.get(k) ?? emptyRecord()) && !this.marks.editedSince(k))
      return true;
    this.forget(key.userId, key.sessionId, true);
    return false;
  }

  /** A turn is over: its record kept, unless an erase came meanwhile (its prompt held what went).
   * Then its slot is emptied in llama-server too: an erase of a source only this turn recalled
   * did not know the slot held it, and the next session taking it would pass it to the RAM cache.
   * `lost` (its session taken over): its slot no longer counts as the session's, never saved.
   */
  private ended(turn: Work, record: PromptRecord, lost = false) {
    const erased = this.underWay.end(turn, record);
    this.marks.ended(turn.holder);
    if (!erased && !lost) return keepLatest(this.records, turn.holder, record, RECORDS_KEPT);
    this.records.delete(turn.holder);
    const launch = this.server?.launch;
    const slots = launch?.slots.forget((h) => h === turn.holder) ?? [];
    if (launch && erased) clearSlots(launch, slots);
  }

  /**
   * The slot goes to `key`'s session. Its holder's state, when it changed since its last save,
   * is kept by llama-server's RAM cache (it keeps a prompt that is about to lose its slot: 94),
   * so nothing is on this turn's path; it is saved to disk first only when there is no RAM
   * cache, or when the session's own state must be restored over it from disk (a restore
   * writes the slot without passing through the RAM cache). Restored from disk: unless the RAM
   * cache has it, having taken it from a slot since the server's slots were last emptied.
   */
  private async handOver(
    server: Server,
    slot: number,
    key: SessionKey,
    fp: string | undefined,
    evict: string | undefined,
    signal: AbortSignal,
  ): Promise<Looked> {
    signal.throwIfAborted(); // its turn gave up while it waited in the chain: nothing to hand over
    const k = keyText(key);
    const { epoch } = server.launch;
    const inRam = this.inRam.get(k) === epoch;
    this.inRam.delete(k);
    const entry = inRam
      ? undefined
      : restorableState(this.folder, key, fp, (userId, prompt) => this.quotable(userId, prompt));
    const ramCache = (this.deps.cacheRamBytes() ?? 0) > 0;
    const table = server.launch.slots;
    await this.vetted(table, slot, k, signal);
    if (evict && table.holderOf(slot) === evict) {
      if (entry || !ramCache) await this.save(server, slot, evict, fp, { evicting: true });
      else keepLatest(this.inRam, evict, epoch, RECORDS_KEPT); // a session that never comes back is not kept for good
      if (entry || !ramCache) await this.vetted(table, slot, k, signal); // an erase or edit during the save
    }
    // A save llama-server answered after the turn gave up on it: the slot is not its to take.
    signal.throwIfAborted();
    // From now on the slot is this session's, whatever the restore makes of it.
    server.launch.slots.handTo(slot, k);
    const disk = this.deps.disk;
    if (entry && disk) {
      const failed = (err: unknown, what: string) => this.folder.failed(err, what);
      if (await restoreSlotState({ launch: server.launch, slot, entry, disk, signal, failed }))
        server.launch.slots.restored(slot);
    }
    return entry;
  }

  /**
   * The sessions the slot may hold (`priors` too) but `k`'s, erased or edited elsewhere, or quoting
   * what went or what a store that cannot answer does not vouch for: emptied, not cached (their
   * files stay). Asked again after each wait for the slot's work, up to the hand-over: another
   * core's erase landing during a wait is found before the slot goes to the RAM cache.
   */
  private async vetted(table: SlotUse, slot: number, k: string, signal: AbortSignal): Promise<void> {
    for (;;) {
      for (const held of table.sessionsIn(slot).filter((h) => h !== k)) {
        const { userId, sessionId } = keyOf(held);
        const record = this.records.get(held) ?? emptyRecord();
        if (!this.marks.current(held) || !this.quotable(userId, record)) this.forget(userId, sessionId, true);
      }
      const work = table.workOn(slot);
      if (!work) return;
      await abortable(work, signal);
    }
  }

  /** At shutdown, before llama-server stops: what changed since the last save, within STOP_SAVE_MS. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.quiet.clear();
    const server = this.server;
    if (!server?.launch.awake) return;
    await within(this.saveQuietly(server), STOP_SAVE_MS, undefined);
  }

  /**
   * Before the scheduler unloads this model's server (docs/supervisor.md "Scheduling several
   * models"): what changed is saved, within STOP_SAVE_MS; unlike `stop()`, reuse goes on.
   */
  async saveBeforeUnload(stopped: Promise<unknown> = Promise.resolve()): Promise<void> {
    this.quiet.clear();
    const server = this.server;
    if (!server?.launch.awake) return;
    const later: Later = { keeps: [], closed: false };
    await within(this.saveQuietly(server, later), STOP_SAVE_MS, undefined);
    later.closed = true;
    // The server is needed only until it has written the files. The core's part (the sidecars,
    // their fsyncs, the budget) waits for `stopped`: run beside the exit, the fsyncs (which make
    // the filesystem write the slot file out) slowed it by 5–10 ms (docs/performance.md "The
    // swap, fourth pass"). Last in the chain, so a restore after a reload waits for it.
    if (later.keeps.length > 0) void this.run(() => stopped.then(() => keepAll(later.keeps)));
  }

  /**
   * A session (or, without one, every session of the user) erased: its records, its slots'
   * claim, its files, and whatever of it other sessions' records and files hold (memory notes).
   */
  forget(userId: string, sessionId?: string, edited = false): void {
    const mine = (k: string) =>
      k.startsWith(`${userId}/`) && (sessionId === undefined || k === `${userId}/${sessionId}`);
    // A first save (under way, or kept until the stop) has no sidecar, by which removeUser finds a session.
    const known = [...this.records.keys(), ...this.inRam.keys(), ...this.underWay.holders()].filter(mine);
    const sessions = known.map((k) => keyOf(k).sessionId);
    for (const k of this.records.keys()) if (mine(k)) this.records.delete(k);
    const held = this.erase(`${userId}/`, mine, sessionId === undefined ? undefined : `session:${sessionId}`);
    if (edited) return; // its file is the editing core's, or gone with the edit (`forgetEdited`)
    if (sessionId === undefined) this.deps.disk?.removeUser(userId, sessions);
    else this.deps.disk?.removeSession(userId, sessionId);
    this.removeHeld(held);
  }

  /** An edit of the session committed here: its slot (the edited prompt) stays; one another session took
   *  unread still holds the replaced tail (`priors`): emptied; with `quoted`, what quotes it goes too. */
  forgetEdited(userId: string, sessionId: string, quoted: boolean): void {
    const launch = this.server?.launch;
    const slots = launch?.slots.forget((h) => h === `${userId}/${sessionId}`, false) ?? [];
    if (launch) clearSlots(launch, slots);
    if (quoted) this.forgetSource(userId, `session:${sessionId}`);
  }

  /** What notes quote erased (`document:<id>`; `file:<path>`, every user's: `userId` undefined), as `forget`. */
  forgetSource(userId: string | undefined, ...sources: string[]): void {
    const prefix = userId === undefined ? "" : `${userId}/`;
    const held = sources.flatMap((source) => this.erase(prefix, () => false, source));
    this.deps.disk?.removeSource(userId, ...sources);
    this.removeHeld(held);
  }

  /** A first save has no sidecar: the sessions whose records quote what went, by name, in one pass. */
  private removeHeld(held: string[]): void {
    if (held.length > 0) this.deps.disk?.removeNamed(held.map(keyOf));
  }

  /** Whether all the record's notes quote is still stored (another core's erase reaches only its own
   *  records): what is gone is forgotten as by `forgetSource`; null: the store cannot tell (not used). */
  private quotable(userId: string, record: PromptRecord): boolean | null {
    if (quotingNotes(record).length === 0 || !this.deps.gone) return true;
    const gone = this.deps.gone(userId, quotedPassages(record));
    if (gone === null) return null;
    if (gone.length > 0) this.forgetSource(userId, ...gone);
    return gone.length === 0;
  }

  /** The sessions `mine` picks, and those under `prefix` whose records quote `source`: out of every slot and save. */
  private erase(prefix: string, mine: (k: string) => boolean, source: string | undefined): string[] {
    const holding = source ? dropSource(this.records, prefix, source) : new Set<string>();
    const gone = (k: string) => mine(k) || holding.has(k);
    for (const k of this.inRam.keys()) if (gone(k)) this.inRam.delete(k);
    if (this.server) clearSlots(this.server.launch, this.server.launch.slots.forget(gone));
    this.underWay.erase(gone, prefix, source);
    return [...holding];
  }

  /**
   * The lease's server as reuse knows it. Its slot table is the Launch's (emptied there by an
   * idle sleep); a new launch is a new server: its shape read again, its slot folder asked again.
   */
  private serverOf({ launch }: LlamaLease): Server {
    if (this.server?.launch === launch) return this.server;
    this.folder.off = undefined;
    this.server = { launch, fingerprint: launchFingerprinter(launch, this.deps.llama) };
    return this.server;
  }

  /**
   * The session's record: kept in memory, else beside its saved state (if that is of this
   * launch's shape). A hand-over that looked on disk (`looked`) read that sidecar already: once
   * is enough on the turn's way to its request (docs/performance.md, "The session in one write").
   */
  private recordOf(key: SessionKey, fp: string | undefined, looked?: Looked): PromptRecord {
    const known = this.records.get(keyText(key));
    if (known) return known;
    if (looked !== undefined) return looked?.prompt ?? emptyRecord();
    const entry = fp === undefined ? undefined : this.deps.disk?.entry(key.userId, key.sessionId);
    return entry && entry.fingerprint === fp && this.quotable(key.userId, entry.prompt)
      ? entry.prompt
      : emptyRecord();
  }

  private run<T>(work: () => Promise<T>): Promise<T> {
    const next = this.chain.then(work, work);
    this.chain = next.catch(() => {});
    return next;
  }

  /** Once the server has been idle for quietMs: the slots that changed are saved (busy: asked again). */
  private whenQuiet(): void {
    this.quiet.clear();
    if (!this.deps.disk || this.stopped) return;
    this.quiet.set(() => {
      const server = this.server;
      if (server?.launch.awake) return server.launch.slots.idle() ? this.saveQuietly(server) : "busy";
    });
  }

  /** Saves off any turn's path: a failure is logged, never a rejection that could end the core. */
  private saveQuietly(server: Server, later?: Later): Promise<void> {
    const why = (err: unknown) => (err as Error).message;
    return this.saveDirty(server, later).catch((err) => logger.warn(`saving KV state failed: ${why(err)}`));
  }

  private async saveDirty(server: Server, later?: Later): Promise<void> {
    const fp = await server.fingerprint();
    const table = server.launch.slots;
    for (const { slot, holder } of table.dirty()) {
      // Taken by a turn since: its hand-over (in the chain) would wait for a save queued behind it.
      if (!table.dirty().some((d) => d.slot === slot && d.holder === holder)) continue;
      const work = this.run(() => this.save(server, slot, holder, fp, { later }));
      // A turn of this session that begins meanwhile sends its request once the save is done.
      table.working(slot, work);
      await work;
    }
  }

  private async save(
    server: Server,
    slot: number,
    holder: string,
    fp: string | undefined,
    o: { later?: Later | undefined; evicting?: boolean },
  ) {
    const { launch } = server;
    const disk = this.folder.usable();
    // Nothing can be kept past here: the slot's state is as good as saved.
    if (!launch.slots.beginSave(slot, holder, o.evicting)) return;
    const key = keyOf(holder);
    if (!disk || fp === undefined || this.folder.off || launch.died.aborted) return;
    // Asked before llama-server writes, and again around the renames (`wanted`).
    if (!this.marks.current(holder)) return;
    await saveSlotState({
      launch,
      slot,
      holder,
      fingerprint: fp,
      disk,
      underWay: this.underWay,
      later: o.later,
      wanted: () =>
        (launch.slots.holderOf(slot) === holder || this.records.has(holder)) &&
        this.marks.current(holder) &&
        this.quotable(key.userId, this.records.get(holder) ?? emptyRecord()) === true,
      record: () => this.records.get(holder) ?? emptyRecord(),
      failed: (err, what) => this.folder.failed(err, what),
    });
  }
}
