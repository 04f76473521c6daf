import { Database } from "bun:sqlite";
import { accessSync, constants, existsSync, lstatSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/schema.ts";
import { ChunkThread } from "../store/chunk-thread.ts";
import { fsProblemText } from "../store/data-dir-problem.ts";
import type { FileVerdict } from "../store/db/file-check.ts";
import { DB_FILE, damagedMarker, damageNote, damageNoted } from "../store/db/open.ts";
import { kindOf } from "../util/read-file.ts";
import { seconds } from "../util/seconds.ts";
import { within } from "../util/within.ts";
import type { Check } from "./checks.ts";

/** Whether this SQLite has FTS5 (an in-memory probe: nothing on disk is touched). */
export function sqliteHasFts5(): boolean {
  const db = new Database(":memory:");
  try {
    db.run("CREATE VIRTUAL TABLE t USING fts5(x)");
    return true;
  } catch {
    return false;
  } finally {
    db.close();
  }
}

/** How long the file's read may take before the check says it did not finish (doctor.md: about 10 GB here). */
export const FILE_CHECK_LIMIT_MS = 60_000;

/** When the file's read gives up: `signal` (the core's stop), `limitMs` (tests: shorter). */
export interface StoreCheckOptions {
  signal?: AbortSignal;
  limitMs?: number;
}

/**
 * The conversation database (docs/agent.md, The store): whether it opens and passes
 * `quick_check` (read-only: diagnosing changes nothing, and a running core may hold it), whether
 * it was reset or marked damaged, and whether search has FTS5 or falls back to LIKE. The file is
 * read on the store's thread (seconds on a file of several GB: ping, cancel and the stop are
 * answered meanwhile); past `limitMs`, or at the core's stop, it is reported not finished.
 */
export async function storeCheck(
  config: Config,
  hasFts5 = sqliteHasFts5(),
  options: StoreCheckOptions = {},
): Promise<Check> {
  const path = join(config.app.data_dir, DB_FILE);
  const fts = hasFts5 ? "FTS5 search" : "no FTS5 in this SQLite: search and memory use a plain LIKE match";
  const data: Record<string, unknown> = { path, fts5: hasFts5 };
  const status = hasFts5 ? "ok" : "warn";
  const odd = notPlainFile(path);
  if (odd) {
    return {
      id: "store",
      status: "fail",
      message: `the database path ${path} is ${odd}, not a database file: the core does not open it, so chats, documents.add and deletes fail until it is moved out of the way`,
      fix: "move it out of the way (the core makes a fresh database there) or set app.data_dir to another folder (app.data_dir itself may be a link)",
      data: { ...data, problem: odd },
    };
  }
  // The core refuses them all (ownership.ts): SQLite's first read opens a `-journal` blocking (a
  // hot journal), a FIFO there held the read to its limit; one at `-shm` read as a disk error.
  // Beside a database not made yet too: the core refuses before it makes one.
  const side = oddSideFile(path);
  if (side) {
    return {
      id: "store",
      status: "fail",
      message: `${side.file} is ${side.kind}, not a file of the database's own: the core refuses to open the database beside it, so chats, documents.add and deletes fail until it is removed`,
      fix: `remove ${side.file}`,
      data: { ...data, file: side.file, problem: side.kind },
    };
  }
  if (!existsSync(path)) {
    return {
      id: "store",
      status,
      message: `no conversation database yet (made at the first chat); ${fts}`,
      data,
    };
  }
  if (damageNoted(path)) {
    const why = damageNote(damagedMarker(path));
    return {
      id: "store",
      status: "warn",
      message: `the database ${path} met damage (${why}); it is set aside at the core's next start and a fresh one made`,
      fix: "restart the core; the damaged file is kept as local-ai.db.corrupt-<time>",
      data,
    };
  }
  const locked = unwritable(path);
  if (locked) {
    return {
      id: "store",
      status: "fail",
      message: `the database file ${locked.file} cannot be written: ${fsProblemText(locked.problem)}; chats, documents.add and deletes fail until it can`,
      fix: "make it writable by the user the core runs as (its mode or owner, chattr -i, a read-write mount)",
      data: { ...data, file: locked.file, problem: locked.problem },
    };
  }
  const verdict = await readOffLoop(path, options.limitMs ?? FILE_CHECK_LIMIT_MS, options.signal);
  return verdictCheck(verdict, path, status, fts, data);
}

/**
 * What is at the database's path when it is not a regular file, in words: the core refuses a link
 * or a folder there before SQLite opens it (store/db/ownership.ts), and a FIFO fails SQLite's first
 * read, while doctor's read-only open followed the link, or waited its whole limit on the FIFO.
 */
function notPlainFile(path: string): string | undefined {
  try {
    const found = lstatSync(path, { throwIfNoEntry: false });
    return found && !found.isFile() ? kindOf(found) : undefined;
  } catch {
    return undefined; // A folder this user cannot search: the checks below say so.
  }
}

/** The first of the database's side files that exists and is no regular file, in words. */
function oddSideFile(path: string): { file: string; kind: string } | undefined {
  for (const suffix of ["-journal", "-wal", "-shm"]) {
    const file = `${path}${suffix}`;
    const kind = notPlainFile(file);
    if (kind) return { file, kind };
  }
  return undefined;
}

type Unfinished = { kind: "unfinished"; why: string };

/**
 * The file read on a thread of the store's kind (store/chunk-thread.ts), opened for this check
 * alone and ended with it: at the limit or the stop it is terminated (a `quick_check` in SQLite's
 * code runs to its end there, and dies with the process if that comes first).
 */
async function readOffLoop(
  path: string,
  limitMs: number,
  signal: AbortSignal | undefined,
): Promise<FileVerdict | Unfinished> {
  const thread = new ChunkThread(path, 0);
  const reading = thread.checkFile().catch(
    (err: Error & { code?: string }): FileVerdict => ({
      kind: "unreadable",
      message: err.message,
      code: err.code,
    }),
  );
  const limit = seconds(limitMs);
  let onStop = () => {};
  const stopped = new Promise<Unfinished>((resolve) => {
    onStop = () => resolve({ kind: "unfinished", why: "the core began to stop" });
    if (signal?.aborted) onStop();
    else signal?.addEventListener("abort", onStop, { once: true });
  });
  try {
    const late: Unfinished = { kind: "unfinished", why: `it took longer than ${limit}` };
    return await within(Promise.race([reading, stopped]), limitMs, late);
  } finally {
    signal?.removeEventListener("abort", onStop);
    thread.stop();
  }
}

/** The read's verdict in words (exported for tests: verdicts no real file gives on demand). */
export function verdictCheck(
  verdict: FileVerdict | Unfinished,
  path: string,
  status: Check["status"],
  fts: string,
  data: Record<string, unknown>,
): Check {
  switch (verdict.kind) {
    case "unmade":
      return {
        id: "store",
        status,
        message: `the database ${path} is begun but not made yet (a core stopped during its first open); the next start makes it; ${fts}`,
        data,
      };
    case "damaged":
      return {
        id: "store",
        status: "fail",
        message: `the database ${path} is damaged (${verdict.problem}); it is set aside at the core's next start and a fresh one made`,
        fix: "restart the core; the damaged file is kept as local-ai.db.corrupt-<time>",
        data,
      };
    case "reset":
      return {
        id: "store",
        status: "warn",
        message: `the conversation database was unusable and was reset; the old file is kept at ${verdict.from}; ${fts}`,
        fix: "inspect or delete the kept file; the sessions in it are not in the new database",
        data: { ...data, reset_from: verdict.from },
      };
    case "ok":
      return { id: "store", status, message: `${path} is healthy; ${fts}`, data };
    case "unreadable":
      if (leftJournal(path, verdict))
        return {
          id: "store",
          status: "warn",
          message: `the database ${path} has a rollback journal beside it (${path}-journal: a core stopped during a first open or a write); the core's next open rolls it back, which this read-only check cannot; ${fts}`,
          fix: "start the core (any request that uses the conversation database), then run doctor again",
          data: { ...data, journal: `${path}-journal` },
        };
      return {
        id: "store",
        status: "fail",
        message: `the database ${path} cannot be read: ${verdict.message}`,
        fix: "check the file's permissions, or move it aside for the core to start a fresh one",
        data,
      };
    case "unfinished":
      // Not damage: nothing was found wrong, the read was not finished.
      return {
        id: "store",
        status: "warn",
        message: `the database ${path} was not checked whole: its quick_check did not finish (${verdict.why}); ${fts}`,
        fix: "run doctor again when the machine is less busy; a damaged page still surfaces when a statement meets it",
        data: { ...data, finished: false },
      };
  }
}

/**
 * The first of the database's files (its log and the log's index too, when there) this user
 * cannot write: the quick_check reads, and a read-only file passed it while every write failed.
 */
function unwritable(path: string): { file: string; problem: string } | undefined {
  for (const file of [path, `${path}-wal`, `${path}-shm`]) {
    try {
      accessSync(file, constants.W_OK);
    } catch (err) {
      const problem = (err as NodeJS.ErrnoException).code ?? "EIO";
      if (problem !== "ENOENT") return { file, problem };
    }
  }
  return undefined;
}

/**
 * SQLite refused the read-only check for a hot journal it must roll back first: a regular
 * `-journal` with something in it (a FIFO or a link there is named earlier, `oddSideFile`).
 * That is no unreadable file: the core's next open, read-write, rolls it back. SQLite's code
 * says so (`SQLITE_READONLY_ROLLBACK`); its wording only where no code came (a path with
 * "read-only" in it is in some messages).
 */
function leftJournal(path: string, verdict: { message: string; code?: string }): boolean {
  const refused = verdict.code
    ? /^SQLITE_READONLY/.test(verdict.code)
    : /readonly|read-only/i.test(verdict.message);
  try {
    const journal = lstatSync(`${path}-journal`);
    return journal.isFile() && journal.size > 0 && refused;
  } catch {
    return false;
  }
}
