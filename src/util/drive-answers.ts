import type { Stats } from "node:fs";
import { stat } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { within } from "./within.ts";

/**
 * How long a path's stat is waited for before the synchronous file system calls that follow it:
 * on a dead network mount a stat hangs for minutes, and a synchronous one held the whole core
 * (ping, cancel, every chat). Long enough for a sleeping USB or network disk to spin up: a
 * shorter wait called a file on one unreadable.
 */
export const DRIVE_WAIT_MS = 30_000;

/**
 * How many stats may be out at once. Each holds one of the runtime's file threads until it
 * answers, and Bun has as many as the machine has cores (2 at least), unless UV_THREADPOOL_SIZE,
 * else GOMAXPROCS, names 2 or more at start (Bun reads them so, in that order; one naming fewer
 * is passed over): with every one held by a stat that hangs, every file read and write of the
 * core waited with them, for good on a hard-mounted share. One is always left to the rest.
 */
export function statLanes(env: NodeJS.ProcessEnv = process.env, cores = availableParallelism()): number {
  const named = [env.UV_THREADPOOL_SIZE, env.GOMAXPROCS].map(threadCount);
  const pool = Math.min(named.find((n) => n >= 2) ?? Math.max(2, cores), MAX_POOL_THREADS);
  return Math.max(1, pool - 1);
}

/** The most file threads Bun starts, whatever is asked (measured: 2,000 asked, 1,024 ran). */
const MAX_POOL_THREADS = 1024;

/**
 * A count as Bun reads one (a 16-bit Zig integer: a `+`, `_` between digits, only ASCII space,
 * tab, CR, LF and form feed trimmed around), else NaN. parseInt took "3.5" or "3x" as 3, and
 * "99999" or a no-break space before were counts, where Bun passes them over: more lanes than
 * its threads.
 */
function threadCount(value: string | undefined): number {
  const text = value?.replace(/^[ \t\r\n\f]+|[ \t\r\n\f]+$/g, "") ?? "";
  const n = /^\+?\d(?:[\d_]*\d)?$/.test(text) ? Number(text.replace(/[+_]/g, "")) : Number.NaN;
  return n <= 0xffff ? n : Number.NaN;
}

/** Tests: the stat, its wait, how many may be out at once. */
export interface DriveOptions {
  /** A method, so a test's stat may take text alone: only a folder's file is asked by its bytes. */
  stat?(path: string | Buffer): Promise<unknown>;
  statWaitMs?: number;
  lanes?: number;
}

/** A stat queued for a lane or `asked`, not answered yet; `stuck` once asked longer than the wait. */
interface Asked {
  answer: Promise<Stats | null | "late">;
  asked: boolean;
  stuck: boolean;
}

/** A wait that gave up, told apart from a refusal (`late` as the answer itself). */
const WAITED = Symbol("waited");

/**
 * Whether a path's drive answers a stat, asked off the loop: false once the wait is over. A stat
 * that never ends holds one of the runtime's file threads, so one is asked per path however often
 * it is asked about (a host that retries would otherwise take them all, and every file read with
 * them), and at most `lanes` at once: past that they queue, and while every lane is held by a
 * stat that did not answer within its wait, a new path is answered `late` at once, not asked.
 */
export class DriveAnswers {
  /** By path: a question after it waits on it rather than asking another. */
  private readonly stats = new Map<string, Asked>();
  private readonly queue: ((go: boolean) => void)[] = [];
  private running = 0;
  private stuck = 0;

  constructor(private readonly options: DriveOptions = {}) {}

  get waitMs(): number {
    return this.options.statWaitMs ?? DRIVE_WAIT_MS;
  }

  private lanesKnown: number | undefined;

  private get lanes(): number {
    // Asked once: the cores are read on the chat's way otherwise (its KV fingerprint's stat).
    this.lanesKnown ??= this.options.lanes ?? statLanes();
    return this.lanesKnown;
  }

  /**
   * Whether a stat of `path` is out: false after a `late` means it was refused, or its wait
   * ended while it still queued for a lane; its drive was never asked.
   */
  asking(path: string | Buffer): boolean {
    return this.stats.get(keyOf(path))?.asked === true;
  }

  async answers(path: string): Promise<boolean> {
    return (await this.statOf(path)) !== "late";
  }

  /**
   * The path's stat (null: it failed, a missing file), or `late` once the wait is over. A path
   * as bytes (a name that is not UTF-8: store/folder-names.ts) is asked so too, in the same lanes.
   */
  async statOf(path: string | Buffer): Promise<Stats | null | "late"> {
    const key = keyOf(path);
    let asked = this.stats.get(key);
    if (!asked) {
      if (this.stuck >= this.lanes) return "late"; // every lane hangs: none is asked
      const mine: Asked = { answer: Promise.resolve(null), asked: false, stuck: false };
      mine.answer = this.lane().then<Stats | null | "late">((go) => (go ? this.ask(path, mine) : "late"));
      void mine.answer.then(() => this.settled(key, mine));
      this.stats.set(key, mine);
      asked = mine;
    }
    const now = await within(asked.answer, this.waitMs, WAITED);
    return now === WAITED ? "late" : now;
  }

  /**
   * `work` (a folder's listing, models/list-candidates.ts) run in the stats' lanes, or `late` once
   * the wait is over or while every lane hangs. A folder whose stat answered can still hang its
   * listing (an NFS client answers stats from cached attributes), holding a file thread for good:
   * started outside the lanes, listings of folders on one dead share took every thread, and each
   * file read and write of the core waited with them. Rejects as `work` does.
   */
  async laned<T>(work: () => Promise<T>): Promise<T | "late"> {
    if (this.stuck >= this.lanes) return "late";
    const task = { stuck: false };
    const answer = this.lane().then<T | "late">((go) =>
      go ? this.held(Promise.resolve().then(work), task) : "late",
    );
    const done = () => {
      if (task.stuck) this.stuck--;
    };
    answer.then(done, done);
    const now = await within(answer, this.waitMs, WAITED);
    return now === WAITED ? "late" : now;
  }

  private ask(path: string | Buffer, asked: Asked): Promise<Stats | null> {
    asked.asked = true;
    return this.held(this.statNow(path), asked);
  }

  /** `answer` holding a lane till it settles; marked `stuck` once out longer than the wait. */
  private async held<T>(answer: Promise<T>, asked: { stuck: boolean }): Promise<T> {
    // Hung by its own time, from when it was asked: a caller's wait that began while it queued
    // behind a slow one ends sooner, and refused every path for a stat out a moment.
    const settled = answer.then(
      () => null,
      () => null, // a listing's failure is its caller's to hear: this only watches its time
    );
    void within(settled, this.waitMs, WAITED).then((now) => {
      if (now !== WAITED) return;
      asked.stuck = true;
      // The queued cannot be asked while every lane hangs: they are late now, not in 30 s.
      if (++this.stuck >= this.lanes) for (const go of this.queue.splice(0)) go(false);
    });
    try {
      return await answer;
    } finally {
      const next = this.queue.shift();
      if (next) next(true);
      else this.running--;
    }
  }

  private async statNow(path: string | Buffer): Promise<Stats | null> {
    try {
      const st = await (this.options.stat ?? stat)(path);
      return st instanceof Object && "ino" in st ? (st as Stats) : null;
    } catch {
      return null; // a missing file answers too: the synchronous calls after it say what is wrong
    }
  }

  /** Resolves true with a lane taken, false when refused while queued. */
  private lane(): Promise<boolean> {
    if (this.running < this.lanes) {
      this.running++;
      return Promise.resolve(true);
    }
    return new Promise((go) => this.queue.push(go));
  }

  private settled(key: string, asked: Asked): void {
    if (this.stats.get(key) === asked) this.stats.delete(key);
    if (asked.stuck) this.stuck--;
  }
}

/** A path's key among the stats out: bytes apart from every text path (none holds a NUL). */
function keyOf(path: string | Buffer): string {
  return typeof path === "string" ? path : `\0${path.toString("latin1")}`;
}

/** The core's: one stat per path across the model memo, request paths and the listing. */
export const drives = new DriveAnswers();

/** The core's, unless a test hands in its own stat or wait. */
export function answersFor(options: DriveOptions): DriveAnswers {
  return options.stat || options.statWaitMs !== undefined ? new DriveAnswers(options) : drives;
}

/**
 * Waits for `path`'s stat off the loop: null once it answered, else why the file is unreadable.
 * The model's read (plan/model-memo.ts), a configured projector's (models/find-projector.ts),
 * each header's (plan/gguf-read.ts: a split's part, a projector found beside the model).
 * Refused unasked (every lane held by other paths' stats that hang), its own drive is not blamed.
 */
export async function statLate(answers: DriveAnswers, path: string): Promise<string | null> {
  return (await answers.answers(path)) ? null : whyLate(answers, path);
}

/** Why `path`'s stat came back `late`, its own drive blamed only when it was asked. */
export function whyLate(answers: DriveAnswers, path: string | Buffer): string {
  const why = answers.asking(path)
    ? `its drive did not answer within ${answers.waitMs / 1000} s`
    : "not asked while other paths' drives do not answer";
  return `${why} (a network drive offline?)`;
}
