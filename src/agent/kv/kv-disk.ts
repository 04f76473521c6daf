import { createHash } from "node:crypto";
import { chmodSync, existsSync, renameSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { pidSpace } from "../../platform/pid-space.ts";
import { type StagedWrite, stageFileAtomic, syncFolderAsync } from "../../store/atomic.ts";
import { type FileIdentity, fileIdentity, sameFile } from "../../util/file-identity.ts";
import { logger } from "../../util/logger.ts";
import { ensurePrivateDir, PRIVATE_FILE_MODE } from "../../util/private-fs.ts";
import { dropFile, replaceZeroed, Zeroes } from "./drop-file.ts";
import { keepBudget } from "./kv-budget.ts";
import { type KvEntry, sameSave } from "./kv-entry.ts";
import {
  type Described,
  listedSince,
  listFolder,
  orphansOf,
  readInPasses,
  readSidecar,
  sidecarNames,
} from "./kv-reads.ts";
import { LeftoverPass, leftoverTemp, OWN_TEMP, tempName } from "./kv-temps.ts";
import { type KvUse, KvUseCount, OWN_FILE } from "./kv-use.ts";
import type { SessionKey } from "./session-key.ts";

export type { KvEntry, KvUse };

/**
 * The sessions' saved KV state under data_dir/kv (docs/agent.md#prompt-reuse), one pair of files
 * per session: `<name>.bin`, the slot as llama-server saved it (`--slot-save-path` is this folder),
 * and `<name>.json`, whose session it is, the fingerprint it is valid for, its size and when it was
 * last used, and the session's prompt record. llama-server writes a save under a temporary name,
 * which is renamed into place only once it is whole: a save cut short (the server killed, a full
 * disk) leaves the last good file. Files are 0600 in a 0700 folder. All sessions' files together
 * stay within `llama.kv_disk_bytes`, the least recently used going first.
 *
 * Another core may share the folder (two app windows on one data_dir): each renames whole
 * files into place, so a reader sees an old file or a new one; a file the other core removed
 * fails its restore, which the turn survives by processing its prompt.
 *
 * Nothing here throws into a turn or a background save (docs/agent.md, "Prompt reuse"): the
 * folder may be a file, a state file a directory, a file someone else's. Only files named as
 * this core names them count against the budget or are ever removed, and only files are
 * removed (a directory in their place is left, and the session's state is not kept).
 */

export class KvDisk {
  /** Each removed file zeroed off the loop (drop-file.ts); an erase's answer waits for `done()`. */
  readonly zeroes = new Zeroes();
  private readonly count: KvUseCount;
  /** Files a removal failed on (EACCES, EBUSY…) while an erase runs, and what it answers (`unremovedBy`). */
  private failing: { paths: Set<string>; left: string[] } | undefined;
  private readonly leftovers = new LeftoverPass();

  constructor(
    readonly dir: string,
    readonly budgetBytes: number,
    private readonly now: () => number = Date.now,
    /**
     * Which processes a pid names here (platform/pid-space.ts), put in our temporary names: asked
     * at each, so a space read in part at start-up is whole once it is (kept then: no read).
     */
    private readonly space: () => string = pidSpace,
    /** Our monotonic clock: another pid space's temps are timed on it (kv-temps.ts `leftoverTemp`). */
    private readonly mono: () => number = () => performance.now(),
  ) {
    this.count = new KvUseCount(dir);
  }

  /** The session's file name, without extension: a bare name, as llama-server takes it. */
  nameOf(userId: string, sessionId: string): string {
    return `s-${createHash("sha256").update(`${userId}\0${sessionId}`).digest("hex").slice(0, 32)}`;
  }

  /** A name for llama-server to save under before the file is whole. */
  tempName(name: string): string {
    return tempName(name, this.space());
  }

  /** The session's saved state, if it has one of the current shape (a file of another is dropped). */
  entry(userId: string, sessionId: string): KvEntry | undefined {
    const name = this.nameOf(userId, sessionId);
    const entry = readSidecar(this.sidecarOf(name));
    if (!entry || entry.user_id !== userId || entry.session_id !== sessionId) return undefined;
    return entry;
  }

  /** Whether the state file of `name` is there (another core may have removed it). */
  hasState(name: string): boolean {
    try {
      return statSync(this.binOf(name)).isFile();
    } catch {
      return false;
    }
  }

  /**
   * A save llama-server finished under `temp`: moved into place, made owner-only, described,
   * and the budget kept. False when it could not be, or when `wanted()` (asked after the
   * sidecar's sync, right before the renames, in the same tick, and again right after them) says
   * the session is gone or another core's: the files are removed then. The syncs run off the
   * event loop (a swap's stop waits on it).
   */
  async commit(temp: string, entry: KvEntry, wanted: () => boolean = () => true): Promise<boolean> {
    const name = this.nameOf(entry.user_id, entry.session_id);
    const path = join(this.dir, temp);
    let described = false;
    try {
      const size = statSync(path).size;
      // llama-server answers the bytes it meant to write (llama_state_seq_save_file's file.tell())
      // and checks no flush: on a full disk the file is shorter, and would be restored as whole.
      if (size !== entry.bytes) {
        logger.warn(
          `the KV state of session ${entry.session_id} is ${size} bytes on disk, llama-server wrote ${entry.bytes} (a full disk cuts it short): not kept`,
        );
        this.discard(temp);
        return false;
      }
      // One state over the whole budget would evict every other and then itself: not kept.
      const bytes = size + JSON.stringify(entry).length;
      if (bytes > this.budgetBytes) {
        logger.info(
          `the KV state of session ${entry.session_id} (${bytes} bytes) is over llama.kv_disk_bytes (${this.budgetBytes}): not kept`,
        );
        this.discard(temp);
        return false;
      }
      chmodSync(path, PRIVATE_FILE_MODE);
      const sidecar = this.stageSidecar(name, entry);
      try {
        await sidecar.flush();
      } catch (err) {
        sidecar.discard();
        throw err;
      }
      // Erased meanwhile (sessions.delete): nothing of it is put back.
      if (!wanted()) {
        sidecar.discard();
        this.discard(temp);
        return false;
      }
      // Described first: a state file without its sidecar is never restored. The old ones zeroed.
      this.count.around([name], () => {
        replaceZeroed(this.sidecarOf(name), this.zeroes, sidecar, { folder: false });
        described = true;
        replaceZeroed(this.binOf(name), this.zeroes, { commit: () => renameSync(path, this.binOf(name)) });
      });
      // Asked again once in place: another core's erase (its rows first, then its files) or
      // takeover of the session between the check and the renames would otherwise leave them.
      if (!wanted()) {
        this.remove(name);
        return false;
      }
    } catch (err) {
      logger.warn(`the KV state of session ${entry.session_id} could not be kept: ${(err as Error).message}`);
      this.discard(temp);
      // The sidecar now describes a state that is not there, and the old file goes with it: never
      // restored without a sidecar, it would also be one `removeUser` (which reads sidecars) misses.
      if (described)
        this.count.around([name], () => {
          dropFile(this.sidecarOf(name), this.zeroes);
          dropFile(this.binOf(name), this.zeroes);
        });
      return false;
    }
    // Counted afresh there: another core's states count too (kv-budget.ts).
    await keepBudget(this, this.count, name);
    await syncFolderAsync(this.dir);
    return true;
  }

  /**
   * The saved state was restored: it is the most recently used. Only while the sidecar is still
   * the one the restore read: erased meanwhile (documents.delete), it is not written back with
   * the notes it quotes; saved again by another core, the newer one's sources are kept. Another
   * core's erase between the read and the rename takes the state first (`remove`): a sidecar put
   * back over none is removed again, still the one written here (another core's first save may
   * have renamed its own there since).
   */
  touch(entry: KvEntry): void {
    try {
      const name = this.nameOf(entry.user_id, entry.session_id);
      const now = readSidecar(this.sidecarOf(name));
      if (!now || !sameSave(now, entry)) return;
      const temp = tempName(name, this.space(), ".json");
      const staged = this.stageSidecar(name, { ...entry, used_at: this.now() }, temp);
      const written = fileIdentity(join(this.dir, temp));
      this.count.around([name], () => replaceZeroed(this.sidecarOf(name), this.zeroes, staged));
      if (written && !this.hasState(name)) this.removeKept([{ ...written, path: this.sidecarOf(name) }]);
    } catch {
      // Only its place in the eviction order is lost.
    }
  }

  /** Drops what llama-server left under a temporary name (a save that failed or was not kept). */
  discard(temp: string): void {
    this.drop(join(this.dir, temp));
  }

  /** Drops a session's files (a restore that failed, another fingerprint, the session deleted). */
  remove(name: string): void {
    this.count.around([name], () => {
      this.drop(this.binOf(name));
      // A state that stays keeps its sidecar: a delete sent again finds it by what its notes quote.
      if (!existsSync(this.binOf(name))) this.drop(this.sidecarOf(name));
    });
  }

  /**
   * A session erased (`sessions.delete`): its files and temporary files, and those of the user's
   * other sessions whose saved tokens hold passages of it (memory notes), so nothing of it stays
   * on disk. A save of it under way finds its temporary file gone, or is not kept (`wanted`).
   * `quoting` false: its own files only (a set-aside turn erased no passage others quote).
   */
  removeSession(userId: string, sessionId: string, quoting = true): void {
    const source = `session:${sessionId}`;
    this.erase(
      (e) =>
        e.user_id === userId && (e.session_id === sessionId || (quoting && e.note_sources.includes(source))),
      this.nameOf(userId, sessionId),
    );
  }

  /** The files of `sessions` by name, temporary ones included, in one pass (reuse.ts `removeHeld`). */
  removeNamed(sessions: readonly SessionKey[]): void {
    this.erase(() => false, ...sessions.map((s) => this.nameOf(s.userId, s.sessionId)));
  }

  /** Every file of a user (`users.delete`), and by name those of `sessions` (a first save has no sidecar). */
  removeUser(userId: string, sessions: readonly string[] = []): void {
    this.erase((e) => e.user_id === userId, ...sessions.map((s) => this.nameOf(userId, s)));
  }

  /**
   * Something a note quoted is erased (`documents.delete`: `document:<id>`; a memory folder's file gone
   * or changed: `file:<path>`, any user's, `userId` undefined): the files of each session quoting it.
   */
  removeSource(userId: string | undefined, ...sources: string[]): void {
    const erased = new Set(sources);
    this.erase(
      (e) => (userId === undefined || e.user_id === userId) && e.note_sources.some((s) => erased.has(s)),
    );
  }

  /**
   * Runs `erase` (synchronous: the removals of a session's or a user's files) and returns those
   * of its files a removal failed on that are still there: a saved state the erase could not take
   * (the folder not writable, the file held open on Windows), which `sessions.delete` and
   * `users.delete` must not answer ok over (docs/agent.md#prompt-reuse). Another session's file
   * stuck meanwhile is not this erase's; a save's file it takes once the save is over, added then.
   */
  unremovedBy(erase: () => void): string[] {
    const failing = { paths: new Set<string>(), left: [] as string[] };
    this.failing = failing;
    try {
      erase();
    } finally {
      this.failing = undefined;
    }
    failing.left.push(...[...failing.paths].filter((path) => existsSync(path)));
    return failing.left;
  }

  /** Drops each of `kept` still the file it was, never one saved since, a sidecar once its state
   *  is gone (`remove`): the retry of an erase that could not remove them (kv-erase.ts). */
  removeKept(kept: FileIdentity[]): void {
    const bins = kept.filter((f) => f.path.endsWith(".bin"));
    const names = kept.flatMap((f) => OWN_FILE.exec(basename(f.path))?.[1] ?? []);
    this.count.around(names, () => {
      for (const f of [...bins, ...kept.filter((f) => !bins.includes(f))]) {
        const described = f.path.endsWith(".json") && existsSync(`${f.path.slice(0, -5)}.bin`);
        if (!described && sameFile(f, fileIdentity(f.path))) this.drop(f.path);
      }
    });
  }

  private drop(path: string): void {
    if (!dropFile(path, this.zeroes)) this.failing?.paths.add(path);
  }

  /**
   * What the saved states take now (`status`), counted at each save and kept by this core's
   * removals; null while the first count, which the first ask starts, is under way (kv-use.ts).
   */
  usage(): KvUse | null {
    return this.count.get(() => listFolder(this.dir));
  }

  /** Removes what no save waits for any more: temporary files of saves that never finished. */
  sweep(): void {
    ensurePrivateDir(this.dir);
    this.dropLeftovers();
  }

  /**
   * The files of the sessions `matches` picks and of `also`, temps of any age; then crashes' leftover
   * temps. One listing; the sidecars read a bounded number a turn of the loop (kv-reads.ts), the
   * removals after the last, the erase's failures then still its own (`unremovedBy`, `zeroes`).
   */
  private erase(matches: (e: KvEntry) => boolean, ...also: string[]): void {
    const listing = listFolder(this.dir);
    const failing = this.failing;
    const sidecars = sidecarNames(listing);
    // Over several turns, listed again: a first save renamed into place meanwhile (kv-reads.ts `listedSince`).
    const found = (described: Described, turned: boolean) => {
      const now = turned ? listedSince(this.dir, listing, described) : listing;
      return this.zeroes.within(() => this.eraseFound(now, described, matches, also, failing));
    };
    const later = readInPasses(sidecars, (name) => readSidecar(this.sidecarOf(name)), found);
    // Failing over its turns, it may have left any of its files: its delete fails, naming the folder.
    if (later) this.zeroes.hold(later, () => failing?.left.push(this.dir));
  }

  private eraseFound(
    listing: string[],
    described: Described,
    matches: (e: KvEntry) => boolean,
    also: string[],
    failing: KvDisk["failing"],
  ): void {
    const outer = this.failing;
    // Past the erase's own turn (the sidecars read over several): its failures gathered apart.
    const own = failing && outer !== failing ? { paths: new Set<string>(), left: failing.left } : failing;
    this.failing = own;
    try {
      const names = new Set(described.flatMap(({ name, entry }) => (matches(entry) ? [name] : [])));
      for (const name of also) names.add(name);
      for (const name of names) this.remove(name);
      // A state without a readable sidecar is never restored and whose it is cannot be told: each
      // erase takes it, quietly (one that stays may be any session's, not this erase's to fail).
      for (const name of orphansOf(described, listing)) {
        if (names.has(name)) continue;
        this.count.around(
          [name],
          () => dropFile(this.binOf(name), this.zeroes) && dropFile(this.sidecarOf(name), this.zeroes),
        );
      }
      // Their temporary files, and (once it is over) a save's asked before, its file not yet made.
      const erased = (path: string) => names.has(OWN_TEMP.exec(basename(path))?.[1] ?? "");
      for (const f of listing) if (erased(f)) this.drop(join(this.dir, f));
      const late = this.failing?.left; // a removal failing then is this erase's still: its delete awaits `done()`
      this.zeroes.removeOnceSettled(
        erased,
        (p) => dropFile(p, this.zeroes) || !existsSync(p) || late?.push(p),
      );
      this.dropLeftovers();
    } finally {
      this.failing = outer;
    }
    if (own && own !== failing) own.left.push(...[...own.paths].filter((path) => existsSync(path)));
  }

  /** Temporary files no save waits for (kv-temps.ts `leftoverTemp`). */
  private dropLeftovers(): void {
    for (const f of this.leftovers.temps(this.dir)) {
      const path = join(this.dir, f);
      try {
        if (leftoverTemp(f, path, this.space(), this.now(), this.leftovers.seen, this.mono()))
          dropFile(path, this.zeroes);
      } catch {}
    }
  }

  /** A sidecar under a temporary name of ours (a crash's leftover known as ours), zeroed if not kept. */
  private stageSidecar(
    name: string,
    entry: KvEntry,
    temp = tempName(name, this.space(), ".json"),
  ): StagedWrite {
    return stageFileAtomic(this.sidecarOf(name), `${JSON.stringify(entry)}\n`, temp, (t) => this.drop(t));
  }

  private binOf(name: string): string {
    return join(this.dir, `${name}.bin`);
  }

  private sidecarOf(name: string): string {
    return join(this.dir, `${name}.json`);
  }
}
