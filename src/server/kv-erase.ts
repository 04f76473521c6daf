import { existsSync } from "node:fs";
import type { KvDisk } from "../agent/kv/kv-disk.ts";
import type { PromptReuse } from "../agent/kv/reuse.ts";
import { type FileIdentity, fileIdentity, sameFile } from "../util/file-identity.ts";
import { logger } from "../util/logger.ts";
import type { SeveralModels } from "./several-models.ts";

/** Stuck KV files (and their sidecars) kept to be tried again, at most: each retry stats each. */
export const KV_RETRY_KEPT = 1000;

/** Where the erases of saved KV state look: the prompt reuses and the folder. */
export interface KvEraseDeps {
  /** The folder (data_dir/kv). */
  dir(): string;
  /** The budgeted folder prompt reuse saves into; null with saving off. */
  budgeted(): KvDisk | null;
  /** The budgeted folder if made already (undefined: never asked, so no removal of it to zero). */
  made(): KvDisk | null | undefined;
  /** The one model's prompt reuse, once made. */
  reuse(): PromptReuse | undefined;
  /** Several models' prompt reuses: an erase over each, false when none was made (undefined: one model). */
  several(): Pick<SeveralModels, "forget" | "forgetSource" | "forgetEdited"> | undefined;
}

/**
 * Erases of saved KV state (`sessions.delete`, `users.delete`, `documents.delete`, a memory folder's
 * file gone): the prompt reuse's own erase (its records, its slots, its files), and data_dir/kv
 * as it lies on disk when no reuse went over it: none made yet, or saving off
 * (`llama.kv_disk_bytes` 0), when a run with saving on may have left files there, which an erase
 * takes all the same (docs/agent.md#prompt-reuse). Each returns the files it could not remove.
 */
export class KvErase {
  private unbudgeted: KvDisk | undefined;
  /**
   * The files a memory folder file's erase could not remove, by path, as they were then: tried
   * again at each erase while still those files. Never by the source string again: the folder
   * file edited is indexed under the same one, and sessions quoting its new text keep their state.
   */
  private readonly stuck = new Map<string, FileIdentity>();
  /** Each erase's zeroing, by the list of files it could not remove that it answered (`zeroed`). */
  private readonly zeroings = new WeakMap<readonly string[], Promise<void>>();

  constructor(private readonly deps: KvEraseDeps) {}

  /**
   * A memory folder's files gone or changed (every user's notes quoting them): no request waits on
   * this erase to fail it, and the index no longer names them, so the files it could not remove
   * are logged, named, and tried again at each later erase of this core (docs/agent.md#prompt-reuse).
   */
  folderGone(...sources: string[]): string[] {
    return this.keptForRetry(
      this.forgetSource(undefined, ...sources),
      "quoting a memory folder's removed or changed file",
    );
  }

  /**
   * An edit's erase of its session's tail (`forgetEdited`), what it could not remove kept the
   * same way: the chat's answer stands (it is committed), and the session's delete, which would
   * take them too, may never come.
   */
  edited(userId: string, sessionId: string, model: string, quoted = true): string[] {
    return this.keptForRetry(
      this.forgetEdited(userId, sessionId, model, quoted),
      "holding an edit's replaced messages",
    );
  }

  /**
   * `left` logged and kept for the retries, and so is what fails late: a save's file under way,
   * made after the erase looked, is removed once the save is over (drop-file.ts
   * `Zeroes.removeOnceSettled`), a failure then added to `left`, seen once `zeroed(left)` is (a
   * review found those neither said nor tried again, the words left on disk).
   */
  private keptForRetry(left: string[], what: string): string[] {
    const now = left.length;
    this.keepStuck(left.slice(), what);
    void this.zeroed(left)
      .then(() => this.keepStuck(left.slice(now), what))
      .catch((err: unknown) => logger.warn(`a saved KV state's erase: ${(err as Error).message}`));
    return left;
  }

  /** `left` logged, named, and kept to be tried again at each later erase (`keptForRetry`). */
  private keepStuck(all: string[], what: string): void {
    // The folder itself: an erase over several turns failed (kv-disk.ts `erase`), which of its
    // files stayed unknown; said so, not counted as a file tried again (it is not).
    const dir = this.deps.dir();
    const left = all.filter((path) => path !== dir);
    if (left.length < all.length)
      logger.warn(
        `an erase of saved KV state ${what} failed part way over ${dir}: which of its files stayed cannot be told, and none is tried again`,
      );
    if (left.length === 0) return;
    let full = false;
    for (const path of left) {
      // A state's sidecar stays while the state does (kv-disk.ts `remove`) and holds its notes'
      // text: kept together, or the retry would take the state and leave its sidecar for good.
      const both = path.endsWith(".bin") ? [path, `${path.slice(0, -4)}.json`] : [path];
      const kept = both.flatMap((p) => fileIdentity(p) ?? []);
      if (this.stuck.size + kept.length > KV_RETRY_KEPT) full = true;
      else for (const f of kept) this.stuck.set(f.path, f);
    }
    // Past the bound, not tried again here: the notes of a restored state are checked (reuse.ts).
    logger.warn(
      `${left.length} saved KV state file(s) ${what} could not be removed (${left.join(", ")}): tried again at the next erase${full ? ` (at most ${KV_RETRY_KEPT} files)` : ""}`,
    );
  }

  forget(userId: string, sessionId?: string): string[] {
    return this.run((disk) => {
      const several = this.deps.several();
      if (
        this.reused(
          several ? several.forget(userId, sessionId) : this.one((r) => r.forget(userId, sessionId)),
        )
      )
        return;
      if (sessionId === undefined) disk?.removeUser(userId);
      else disk?.removeSession(userId, sessionId);
    });
  }

  /** What memory notes quote erased, from the saved KV state of `userId` (every user's: undefined). */
  forgetSource(userId: string | undefined, ...sources: string[]): string[] {
    return this.run((disk) => {
      const several = this.deps.several();
      const erased = several
        ? several.forgetSource(userId, ...sources)
        : this.one((r) => r.forgetSource(userId, ...sources));
      if (!this.reused(erased)) disk?.removeSource(userId, ...sources);
    });
  }

  /**
   * An edit (`replace_from`, `regenerate`) erased its session's tail: the state the session saved
   * before it holds that tail's tokens (its slot now holds the edited prompt, kept and saved
   * again; a slot another session took, no request of it taken up there yet, still holds the
   * tail and is emptied), and other sessions' records, slots and files quoting the session (memory notes, their
   * text in the sidecars) may hold the erased passages. Those go as for a `documents.delete`,
   * every note of the session with them (their rows are not told apart: a later turn of those
   * sessions processes its prompt again, no more). With several models, the session's slots and
   * records on models other than `model`, the one the edit ran on, hold the tail too. Not
   * `quoted` (a turn set aside an interrupted one, erasing no stored passage): the session's own
   * state only; what quotes its notes quotes nothing erased, and dropping it cost a prefill.
   */
  forgetEdited(userId: string, sessionId: string, model: string, quoted = true): string[] {
    return this.run((disk) => {
      const several = this.deps.several();
      if (several) several.forgetEdited(userId, sessionId, model, quoted);
      else this.one((r) => r.forgetEdited(userId, sessionId, quoted));
      disk?.removeSession(userId, sessionId, quoted);
    });
  }

  /**
   * The files the erases removed, zeroed (drop-file.ts `Zeroes`): a delete answers once its
   * files' blocks no longer hold the words (docs/agent.md, The store), waiting for the erase
   * whose answer `left` was only (another session's removal parked behind its own save that did
   * not answer is not its to wait for); shutdown, for every one (`left` undefined).
   * A sidecar's staged temp file a refused rename dropped is zeroed likewise (KvDisk's drop).
   */
  async zeroed(left?: readonly string[]): Promise<void> {
    const own = left && this.zeroings.get(left);
    if (own) return own;
    // Never `budgeted()`: at shutdown it would load the config, which may be missing or refused.
    await Promise.all([this.deps.made()?.zeroes.done(), this.unbudgeted?.zeroes.done()]);
  }

  /**
   * Shutdown's wait for every zeroing (`zeroed`), late saves' files removed first at their
   * servers' exit (kv-temps.ts `lateTempsAtExit`): only a made folder has saves to have run late.
   */
  async atShutdown(): Promise<void> {
    const made = this.deps.made();
    if (made) {
      const { lateTempsAtExit } =
        require("../agent/kv/kv-temps.ts") as typeof import("../agent/kv/kv-temps.ts");
      await lateTempsAtExit(made.zeroes);
    }
    await this.zeroed();
  }

  /** The one model's reuse's erase; false when none is made. */
  private one(erase: (r: PromptReuse) => void): boolean {
    const reuse = this.deps.reuse();
    if (reuse) erase(reuse);
    return reuse !== undefined;
  }

  /** A reuse's erase went over the folder (saving on): it needs no pass of its own. */
  private reused(erased: boolean): boolean {
    return erased && this.deps.budgeted() !== null;
  }

  /**
   * Runs `erase` over the folder (none: it does not exist); the files it could not remove
   * (KvDisk.unremovedBy), the zeroing of those it removed kept for `zeroed(left)`.
   */
  private run(erase: (disk?: KvDisk) => void): string[] {
    const disk = this.folder();
    if (!disk) {
      this.retryStuck();
      erase();
      return [];
    }
    let left: string[] = [];
    const zeroing = disk.zeroes.within(() => {
      this.retryStuck();
      left = disk.unremovedBy(() => erase(disk));
    });
    this.zeroings.set(left, zeroing);
    return left;
  }

  /**
   * What `folderGone` or `edited` could not remove, tried again apart (what is left of it is not this erase's
   * to fail on): each file only while it is still the one that erase meant (a session's state
   * saved since, quoting the folder file's new text, is another).
   */
  private retryStuck(): void {
    if (this.stuck.size === 0) return;
    const kept = [...this.stuck.values()];
    this.stuck.clear();
    const disk = this.folder();
    if (disk) disk.unremovedBy(() => disk.removeKept(kept));
    for (const f of kept) if (sameFile(f, fileIdentity(f.path))) this.stuck.set(f.path, f);
    if (this.stuck.size === 0)
      logger.info(`the ${kept.length} saved KV file(s) earlier erases could not remove were removed at last`);
  }

  /** The budgeted folder, else the folder as it is now (another core may make it any time). */
  private folder(): KvDisk | undefined {
    const budgeted = this.deps.budgeted();
    if (budgeted) return budgeted;
    const dir = this.deps.dir();
    if (!existsSync(dir)) return undefined;
    const { KvDisk } = require("../agent/kv/kv-disk.ts") as typeof import("../agent/kv/kv-disk.ts");
    this.unbudgeted ??= new KvDisk(dir, 0);
    return this.unbudgeted;
  }
}
