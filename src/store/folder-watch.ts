import { type FSWatcher, watch } from "node:fs";
import { logger } from "../util/logger.ts";
import { onDisk } from "./folder-names.ts";
import { worthAWalk } from "./folder-walk.ts";

/**
 * How long after a change in a watched folder it is walked again: the changes of that time (an
 * editor's save is several) are taken in one walk, and a folder written to all the time is
 * walked at most about once a second, not once per write.
 */
export const WATCH_SETTLE_MS = 1000;
/** Directories watched, all folders together (each is one inotify watch on Linux, from a budget the user's other programs share). */
export const MAX_WATCHED_DIRS = 1000;

/**
 * The `memory.folders` watch (docs/agent.md, "Memory"). On Linux, the directories each walk went
 * through, each watched on its own, at most MAX_WATCHED_DIRS in all: a recursive watch there
 * takes an inotify watch per directory of the whole tree, however large, in one call that holds
 * the main loop, out of a budget the user's other programs share. On Windows and macOS, one
 * recursive watch of the folder, which the system gives as one handle (ReadDirectoryChangesW,
 * FSEvents): a handle per directory there would keep the user from deleting or renaming a
 * directory above a watched one while the core runs. A change that can matter (`worthAWalk`)
 * tells `onChange` the folder WATCH_SETTLE_MS later, with every other folder changed meanwhile.
 * Best-effort: past the cap or a platform's limit a folder's other directories are not watched,
 * and the log says so once.
 */
export class FolderWatch {
  /** Each watched directory's watch, by folder. */
  private readonly watchers = new Map<string, Map<string, FSWatcher>>();
  /** Folders whose watch was cut short: said once. */
  private readonly cut = new Set<string>();
  /** The folders changed since the settle timer was set. */
  private readonly changed = new Set<string>();
  private settle: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly onChange: (roots: string[]) => void,
    private readonly options: { settleMs?: number; maxDirs?: number; recursive?: boolean } = {},
  ) {}

  /** Watches `dirs` (a walk's, the folder first) and no longer the folder's directories gone. */
  watch(root: string, dirs: readonly string[]): void {
    if (this.stopped) return;
    const watched = this.watchers.get(root) ?? new Map<string, FSWatcher>();
    this.watchers.set(root, watched);
    if (this.options.recursive ?? process.platform !== "linux") {
      if (watched.size === 0 && dirs.includes(root)) this.watchOne(root, root, watched, true);
      return;
    }
    const present = new Set(dirs);
    for (const [dir, w] of watched)
      if (!present.has(dir)) {
        w.close();
        watched.delete(dir);
      }
    const cap = this.options.maxDirs ?? MAX_WATCHED_DIRS;
    let total = 0;
    for (const w of this.watchers.values()) total += w.size;
    for (const dir of dirs) {
      if (watched.has(dir)) continue;
      if (total >= cap) {
        this.cutShort(root, `the ${cap} directories watched in all are reached`);
        return;
      }
      if (!this.watchOne(root, dir, watched, false)) return;
      total++;
    }
  }

  /** Watches `dir` for `root`; false when it cannot be (said once). */
  private watchOne(root: string, dir: string, watched: Map<string, FSWatcher>, recursive: boolean): boolean {
    try {
      const w = watch(onDisk(root, dir), { persistent: false, recursive }, (_event, name) => {
        if (worthAWalk(name)) this.folderChanged(root);
      });
      // A watch that fails later (its directory removed) is only no longer there.
      w.on("error", () => {
        w.close();
        watched.delete(dir);
      });
      watched.set(dir, w);
      return true;
    } catch (err) {
      this.cutShort(root, `${dir} cannot be watched: ${(err as Error).message}`);
      return false;
    }
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.settle);
    for (const watched of this.watchers.values()) for (const w of watched.values()) w.close();
    this.watchers.clear();
  }

  private cutShort(root: string, why: string): void {
    if (this.cut.has(root)) return;
    this.cut.add(root);
    logger.warn(`memory folder ${root}: ${why}; a change elsewhere is seen at a recall or the next start`);
  }

  private folderChanged(root: string): void {
    if (this.stopped) return;
    this.changed.add(root);
    if (this.settle) return;
    this.settle = setTimeout(() => {
      this.settle = undefined;
      const roots = [...this.changed];
      this.changed.clear();
      this.onChange(roots);
    }, this.options.settleMs ?? WATCH_SETTLE_MS);
  }
}
