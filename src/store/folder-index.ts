import type { Database } from "bun:sqlite";
import { relative } from "node:path";
import { type DriveAnswers, drives, whyLate } from "../util/drive-answers.ts";
import { logger } from "../util/logger.ts";
import { outOfOpenFiles } from "../util/read-file.ts";
import { whileBusy } from "./busy-retry.ts";
import { settleErase } from "./erase.ts";
import { staleFolderFiles } from "./folder-current.ts";
import { onDisk, readable } from "./folder-names.ts";
import {
  dropFiles,
  filesWithoutRecord,
  insertPassages,
  recordedFiles,
  unlistedRoots,
} from "./folder-rows.ts";
import {
  batches,
  driveAnswered,
  foldersWithin,
  listTextFiles,
  MAX_FOLDER_FILES,
  readFolderFile,
  type TextFile,
} from "./folder-walk.ts";
import { FolderWatch } from "./folder-watch.ts";
import { chunk, type MemoryHit } from "./memory-store.ts";

/**
 * The `memory.folders` index (docs/agent.md, "Memory"), built off the hot path: the folders are
 * walked and read asynchronously, a batch of a few files at a time (at most BATCH_FILES files
 * and BATCH_BYTES bytes, or one file alone up to MAX_FILE_BYTES), each batch inserted into FTS5
 * in its own short transaction, the event loop given back between batches. Only one batch's
 * text is held at once, so what indexing holds is bounded by the largest batch, whatever the
 * folders hold; the main loop is held at most for one batch's insert. Incremental: a file is
 * read again only when its size or mtime changed; a file's rows and its record change in one
 * transaction, so an index cut short (the core stopped) is taken up where it was next time.
 *
 * While the core runs, the directories a walk went through are watched (`folder-watch.ts`): a
 * change there walks that folder again, so a file removed or edited is forgotten (and what
 * quoted it erased, `onGone`) within about a second. Watching is best-effort, so a recall also
 * checks each folder passage it found against its file as it is now (`current`): a passage whose
 * file is gone or changed is never quoted. The walk itself is `folder-walk.ts`.
 */

/** A batch: at most this many files… */
export const BATCH_FILES = 8;
/** …and this many bytes of them, unless one file alone is bigger (up to MAX_FILE_BYTES). */
export const BATCH_BYTES = 256 * 1024;
/** Files forgotten (gone from the folder) per transaction. */
const FORGET_BATCH = 200;

/** A file's text, at most `maxBytes` (`readFolderFile` unless a test says); a name not UTF-8 as bytes (`folder-names.ts`). */
export type FolderReader = (path: string | Buffer, maxBytes: number) => Promise<string>;

export interface FolderIndexOptions {
  read?: FolderReader;
  batchFiles?: number;
  batchBytes?: number;
  /** The most files indexed of a folder (MAX_FOLDER_FILES unless a test says). */
  maxFiles?: number;
  /** Told after each batch is committed (tests count them). */
  onBatch?: (batch: { root: string; files: number; bytes: number }) => void;
  /** Told as each walk of a folder begins (tests count them). */
  onWalk?: (root: string) => void;
  /**
   * Told the sources (`file:<path>`) whose passages a committed transaction dropped (the file
   * gone) or replaced (it changed): what still quotes them elsewhere, a saved KV state, goes too.
   */
  onGone?: (sources: string[]) => void;
  /** Whether the folders are watched while the core runs (on unless a test turns it off). */
  watch?: boolean;
  watchSettleMs?: number;
  maxWatchedDirs?: number;
  /** One recursive watch of each folder rather than one per directory (the platform's default unless a test says). */
  watchRecursive?: boolean;
  /**
   * The core's own files and folders (data_dir, the config file), never indexed even when a
   * memory folder holds them: their text is one user's sessions, or secrets, and a folder's
   * passages are every user's.
   */
  exclude?: readonly string[];
  /** How long after a failed walk its folder is walked again (RETRY_MS unless a test says). */
  retryMs?: number;
  /** How long a batch waits for a write lock held elsewhere (the store's wait). */
  busyWaitMs?: number;
  /** Tests: the stats of a recall's check (`current`) and of a walk's first look; the core's `drives` unless said. */
  drives?: DriveAnswers;
}

/**
 * A walk that failed (a full disk, the database locked past its wait) is tried again this much
 * later: nothing else would walk the folder until a file in it changed or the core restarted,
 * and the files the walk had not reached were never recalled (seen: 288 of 3,000 indexed after
 * the disk had room again).
 */
const RETRY_MS = 60_000;

export class FolderIndex {
  private run: Promise<void> | undefined;
  /** The walk queued behind the current one (one at most: later changes join it). */
  private queued: Promise<void> | undefined;
  /** The folders that walk covers. */
  private readonly dirty = new Set<string>();
  private readonly watch: FolderWatch | undefined;
  private readonly added: (() => void)[] = [];
  private stopped = false;
  /** Folders found with more files than are indexed: said once. */
  private readonly full = new Set<string>();
  /** Files skipped or unreadable, told once a process each (by name: never their text). */
  private readonly told = new Set<string>();
  /** Folders whose passages without a record were looked for (`unrecorded`): once a process. */
  private readonly swept = new Set<string>();
  /** Why each folder's last walk failed, logged once until its walk succeeds or the reason changes. */
  private readonly failed = new Map<string, string>();
  private readonly read: FolderReader;
  private readonly batchFiles: number;
  private readonly batchBytes: number;

  constructor(
    private readonly db: Database,
    private readonly folders: readonly string[],
    private readonly options: FolderIndexOptions = {},
  ) {
    this.read = options.read ?? readFolderFile;
    this.batchFiles = options.batchFiles ?? BATCH_FILES;
    this.batchBytes = options.batchBytes ?? BATCH_BYTES;
    if (options.watch !== false)
      this.watch = new FolderWatch((roots) => void this.refresh(roots), {
        settleMs: options.watchSettleMs,
        maxDirs: options.maxWatchedDirs,
        recursive: options.watchRecursive,
      });
  }

  /**
   * Begins the index once per process (memory is best-effort: errors are logged); each walk
   * watches what it went through. Resolves when the index and any walk queued behind it are done.
   */
  start(): Promise<void> {
    this.run ??= this.forgetUnlisted().then(() => this.indexAll(this.folders));
    return this.run;
  }

  /**
   * Walks `roots` again once the walk under way (if any) is done; a call while one is queued
   * joins it. Resolves when that walk is done.
   */
  refresh(roots: readonly string[] = this.folders): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.run) return this.start();
    for (const r of roots) this.dirty.add(r);
    if (!this.queued) {
      // After the walk under way, however it ended.
      const queued: Promise<void> = this.run
        .catch(() => {})
        .then(() => {
          // From here a change is another walk's: this one may have read past it.
          this.queued = undefined;
          const next = [...this.dirty];
          this.dirty.clear();
          return this.stopped ? undefined : this.indexAll(next);
        });
      this.queued = queued;
      this.run = queued;
    }
    return this.queued;
  }

  /**
   * `hits` less the folder passages whose file is not as it was indexed (gone, or its size or
   * modification time changed); finding one walks its folder again. A passage of a file that
   * cannot be checked now is left out too, its drive not waited on past a second
   * (store/folder-current.ts): what is quoted is never older than the file.
   */
  async current(hits: MemoryHit[]): Promise<MemoryHit[]> {
    const { stale, changed, walk } = await staleFolderFiles(this.db, hits, this.options.drives ?? drives);
    if (stale.size === 0) return hits;
    for (const root of changed) this.dirty.add(root);
    if (walk) void this.refresh([]);
    return hits.filter((h) => h.cite.kind !== "folder" || !stale.has(h.cite.id));
  }

  /** Begins the index if it has not begun, and waits for it at most `maxMs`. */
  async whenIndexed(maxMs: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const waited = new Promise<void>((r) => {
      timer = setTimeout(r, maxMs);
    });
    await Promise.race([this.start(), waited]);
    clearTimeout(timer);
  }

  /** `fn` is told after each walk that added passages (memory's embedder gives them vectors). */
  onAdded(fn: () => void): void {
    this.added.push(fn);
  }

  /** The database is closing: no batch touches it any more, and the folders are no longer watched. */
  stop(): void {
    this.stopped = true;
    this.watch?.stop();
  }

  private async indexAll(roots: readonly string[]): Promise<void> {
    let added = false;
    for (const root of roots) {
      try {
        added = (await this.indexFolder(root)) || added;
        this.failed.delete(root);
      } catch (err) {
        if (!this.stopped) {
          const retryMs = this.options.retryMs ?? RETRY_MS;
          const why = (err as Error).message;
          // Said again only when it changes: a share offline for a day was 1,440 lines a folder.
          if (this.failed.get(root) !== why)
            logger.warn(
              `memory folder ${root} could not be indexed: ${why}; tried again in ${Math.round(retryMs / 1000)} s`,
            );
          this.failed.set(root, why);
          setTimeout(() => void this.refresh([root]), retryMs).unref?.();
        }
      }
      if (this.stopped) return;
    }
    if (!added) return;
    for (const fn of this.added) {
      try {
        fn();
      } catch (err) {
        logger.warn(`memory folders: what was told of new passages failed: ${(err as Error).message}`);
      }
    }
  }

  /** Walks `root`; whether it added passages. */
  private async indexFolder(root: string): Promise<boolean> {
    this.options.onWalk?.(root);
    // The walk's stats and reads go to the drive unbounded: a folder on a share gone offline hung
    // it for good (and each folder after it). Its drive is asked first, once a path however often:
    // one that does not answer is not walked this pass, which fails, is logged and tried again.
    const ask = this.options.drives ?? drives;
    if (!(await ask.answers(root))) throw new Error(whyLate(ask, root));
    const most = this.options.maxFiles ?? MAX_FOLDER_FILES;
    const exclude = [...(this.options.exclude ?? []), ...(await foldersWithin(root, this.folders, ask))];
    const { files, dirs, full, skipped } = await listTextFiles(root, exclude, most, ask);
    if (this.stopped) return false;
    if (full) this.tooMany(root, most);
    for (const s of skipped)
      this.tell(root, s.path, s.reason === "too_large" ? "over 1 MiB" : "its size cannot be read");
    this.watch?.watch(root, dirs);
    const known = recordedFiles(this.db, root);
    const present = new Set(files.map((f) => f.path));
    const gone = [...known.keys(), ...this.unrecorded(root, known)].filter((p) => !present.has(p));
    await this.forgetAll(root, gone);
    const changed = files.filter((f) => {
      const k = known.get(f.path);
      return !k || k.size !== f.size || k.mtime_ms !== Math.round(f.mtimeMs);
    });
    let added = false;
    for (const batch of batches(changed, this.batchFiles, this.batchBytes)) {
      if (this.stopped) return added;
      const read = await Promise.all(batch.map((f) => this.readFile(root, f)));
      if (this.stopped) return added;
      await this.write(() => insertPassages(this.db, root, read));
      added ||= read.some((r) => r.parts && r.parts.length > 0);
      // A changed file's old passages are gone from the index; so must their quotes be.
      const replaced = read.filter((r) => r.parts && known.has(r.file.path)).map((r) => r.file.path);
      if (replaced.length > 0) this.gone(root, replaced);
      // A changed file that cannot be read now: its old text is no longer the file's, and is never
      // quoted (`current`), so it is not kept either; the next walk that can read it indexes it.
      const unreadable = read.filter((r) => !r.parts && known.has(r.file.path)).map((r) => r.file.path);
      if (unreadable.length > 0) await this.forget(root, unreadable);
      this.options.onBatch?.({
        root,
        files: batch.length,
        bytes: batch.reduce((n, f) => n + f.size, 0),
      });
      await nextTurn();
    }
    return added;
  }

  /** A folder past the cap is logged once (`doctor` says so too, its check `memory_folders`). */
  private tooMany(root: string, most: number): void {
    if (this.full.has(root)) return;
    this.full.add(root);
    logger.warn(
      `memory folder ${root} holds more than ${most} text files: only ${most} of them are indexed; name its subfolders in memory.folders instead`,
    );
  }

  /**
   * A skipped file said once a process, at info: its name below the folder (the host's own file
   * names, as the folder's are logged; never its text, docs/supervisor.md "No conversation in the
   * log"). doctor's `memory_folders` counts them too.
   */
  private tell(root: string, path: string, why: string): void {
    if (this.told.has(path)) return;
    this.told.add(path);
    logger.info(`memory folder ${root}: ${readable(relative(root, path))} is not indexed: ${why}`);
  }

  /** A file's chunks; undefined when it cannot be read now (it stays as indexed, tried again next start). */
  private async readFile(
    root: string,
    file: TextFile,
  ): Promise<{ file: TextFile; parts: string[] | undefined }> {
    // A share gone since the listing: the walk fails, and no read hangs a file thread.
    await driveAnswered(this.options.drives ?? drives, onDisk(root, file.path), file.path);
    try {
      // Its size at the walk is the most read: a file grown since waits for the next start.
      return { file, parts: chunk(await this.read(onDisk(root, file.path), file.size)) };
    } catch (err) {
      // Out of open files, nothing is wrong with the file: the walk fails and is tried again
      // (RETRY_MS), where a file left unread waited for a change or a restart.
      if (outOfOpenFiles(err)) throw err;
      this.tell(root, file.path, `it cannot be read now (${(err as Error).message})`);
      return { file, parts: undefined };
    }
  }

  /**
   * The passages of folders memory.folders no longer names, forgotten as files gone are: a
   * folder taken out of the config is never recalled again, and its text must not stay in the
   * database for good either. Once a process, before the first walk.
   */
  private async forgetUnlisted(): Promise<void> {
    try {
      for (const root of unlistedRoots(this.db, this.folders)) {
        const known = recordedFiles(this.db, root);
        // All of it, each try (not `unrecorded`'s once a process: a failed try must not end it).
        await this.forgetAll(root, [...known.keys(), ...filesWithoutRecord(this.db, root, known)]);
        if (this.stopped) return;
        logger.info(`memory folder ${root} is no longer in memory.folders: its passages are forgotten`);
      }
    } catch (err) {
      // A lock held past its wait, a full disk: the walk of the listed folders goes on (a failure
      // here failed start() for good: no folder indexed, every recall's wait refused), and the
      // forgetting is tried again as a failed walk is.
      if (this.stopped) return;
      const retryMs = this.options.retryMs ?? RETRY_MS;
      logger.warn(
        `memory folders no longer in memory.folders could not be forgotten: ${(err as Error).message}; tried again in ${Math.round(retryMs / 1000)} s`,
      );
      setTimeout(() => void this.forgetUnlisted(), retryMs).unref?.();
    }
  }

  /**
   * At a folder's first walk in this process, the files it has passages of but no record: an
   * earlier version walked a folder inside it too, and the inner folder's record replaced its
   * own. They are forgotten with the files gone, unless the walk finds them again.
   */
  private unrecorded(root: string, known: ReadonlyMap<string, unknown>): string[] {
    if (this.swept.has(root)) return [];
    this.swept.add(root);
    return filesWithoutRecord(this.db, root, known);
  }

  /** `paths` forgotten FORGET_BATCH a transaction, the loop free between (a big folder's thousands). */
  private async forgetAll(root: string, paths: string[]): Promise<void> {
    for (let i = 0; i < paths.length && !this.stopped; i += FORGET_BATCH) {
      await this.forget(root, paths.slice(i, i + FORGET_BATCH));
      await nextTurn();
    }
  }

  private async forget(root: string, paths: string[]): Promise<void> {
    await this.write(() => dropFiles(this.db, root, paths));
    this.gone(root, paths);
  }

  /** A write of the index, waiting (off the loop) for a lock another core or the chunk thread holds. */
  private write(work: () => void): Promise<void> {
    return whileBusy(work, this.options.busyWaitMs ?? 0);
  }

  /**
   * Passages dropped: out of what quotes them (saved KV state), and their words out of the index
   * and the log now (as an erase), each whatever the other's fate: a failed purge skipped the first.
   */
  private gone(root: string, paths: string[]): void {
    const sources = paths.map((path) => `file:${relative(root, path)}`);
    for (const work of [() => this.options.onGone?.(sources), () => settleErase(this.db)]) {
      try {
        work();
      } catch (err) {
        logger.warn(`memory folder ${root}: what quoted a changed file: ${(err as Error).message}`);
      }
    }
  }
}

/** The event loop's next turn: pings and other requests waiting are answered first. */
function nextTurn(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}
