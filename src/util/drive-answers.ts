import type { Stats } from "node:fs";
import { stat } from "node:fs/promises";
import { within } from "./within.ts";

/**
 * How long a path's stat is waited for before the synchronous file system calls that follow it:
 * on a dead network mount a stat hangs for minutes, and a synchronous one held the whole core
 * (ping, cancel, every chat). Long enough for a sleeping USB or network disk to spin up: a
 * shorter wait called a file on one unreadable.
 */
export const DRIVE_WAIT_MS = 30_000;

/** Tests: the stat and its wait. */
export interface DriveOptions {
  stat?: (path: string) => Promise<unknown>;
  statWaitMs?: number;
}

/**
 * Whether a path's drive answers a stat, asked off the loop: false once the wait is over. A stat
 * that never ends holds one of the runtime's file threads, so one is asked per path however often
 * it is asked about (a host that retries would otherwise take them all, and every file read with them).
 */
export class DriveAnswers {
  /** A stat not answered yet, by path: a question after it waits on it rather than asking another. */
  private readonly stats = new Map<string, Promise<Stats | null>>();

  constructor(private readonly options: DriveOptions = {}) {}

  get waitMs(): number {
    return this.options.statWaitMs ?? DRIVE_WAIT_MS;
  }

  async answers(path: string): Promise<boolean> {
    return (await this.statOf(path)) !== "late";
  }

  /** The path's stat (null: it failed, a missing file), or `late` once the wait is over. */
  async statOf(path: string): Promise<Stats | null | "late"> {
    let pending = this.stats.get(path);
    if (!pending) {
      const asked = (this.options.stat ?? stat)(path).then(
        (st) => (st instanceof Object && "ino" in st ? (st as Stats) : null),
        () => null, // a missing file answers too: the synchronous calls after it say what is wrong
      );
      pending = asked.finally(() => this.stats.delete(path));
      this.stats.set(path, pending);
    }
    return await within(pending, this.waitMs, "late" as const);
  }
}

/** The core's: one stat per path across the model memo, request paths and the listing. */
export const drives = new DriveAnswers();

/** The core's, unless a test hands in its own stat or wait. */
export function answersFor(options: DriveOptions): DriveAnswers {
  return options.stat || options.statWaitMs !== undefined ? new DriveAnswers(options) : drives;
}
