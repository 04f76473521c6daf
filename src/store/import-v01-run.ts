import type { Database } from "bun:sqlite";
import type { ChatMessage } from "../protocol/chat-message.ts";
import { CoreError, isCoreError } from "../protocol/errors.ts";
import { logger } from "../util/logger.ts";
import type { Conversations } from "./conversations.ts";
import { fsProblemText } from "./data-dir-problem.ts";
import type { OffLoopWrite } from "./erase-work.ts";
import {
  emptyReport,
  finishImport,
  IMPORTED_DIR,
  type ImportReport,
  importNeeded,
  importUnit,
  listUnits,
  sessionImported,
  type V01Unit,
} from "./import-v01.ts";
import { eraseImported, eraseImportedTail } from "./import-v01-erase.ts";
import { heldPrefix, importedBase } from "./import-v01-records.ts";

/**
 * The 0.1 import's steps as plain data, so they run on the store's thread (store/chunk-thread.ts)
 * as well as here: reading a heavy user's files and inserting them costs seconds (about 37 ms a
 * MB), which the main loop must not wait out (ping and cancel answer at once). `erase`: a delete's
 * erase of the 0.1 files (import-v01-erase.ts); `edit`: an edit's, of the turns from `seq` on.
 */
export type V01Work =
  | { kind: "list"; dataDir: string }
  | { kind: "unit"; dataDir: string; unit: V01Unit; mark: number; at: number }
  | { kind: "finish"; dataDir: string; at: number }
  | { kind: "erase"; dataDir: string; userId: string; sessionId?: string }
  | { kind: "edit"; dataDir: string; userId: string; sessionId: string; seq: number };

/** `list`: the units and the erasure mark they are imported against; `unit`: its report, or "done" (the marker is there). */
export type V01Result = { units: V01Unit[]; mark: number } | ImportReport | "done" | boolean | undefined;

/** `conv`: the main connection's conversations, when run there: its commits keep the histories it caches up to date. */
export function runV01(db: Database, work: V01Work, conv?: Conversations): V01Result {
  switch (work.kind) {
    case "list":
      return listUnits(db, work.dataDir);
    case "unit":
      return importUnit(db, work.dataDir, work, conv);
    case "finish":
      return finishImport(db, work.dataDir, new Date(work.at));
    case "erase":
      try {
        eraseImported(work.dataDir, work.userId, work.sessionId);
      } catch (err) {
        throw eraseFailed(err, work.dataDir, "delete");
      }
      return undefined;
    case "edit": {
      // The kept history counts from its first message: the session's seqs from where the import put it.
      const base = importedBase(db, work.userId, work.sessionId);
      const held = (messages: readonly ChatMessage[], upTo: number) =>
        heldPrefix(db, { ...work, base }, messages, upTo);
      const from = { seq: work.seq, base, held };
      try {
        eraseImportedTail(work.dataDir, work.userId, work.sessionId, from, sessionImported(db, work));
      } catch (err) {
        throw eraseFailed(err, work.dataDir, "edit");
      }
      return undefined;
    }
  }
}

/**
 * A file of the 0.1 folder an erase could not remove (scrub-tree.ts: refused, or another file
 * renamed onto it under each open, ECHANGED): as a data_dir problem naming the file and its code.
 * Thrown plain, it crossed the store's thread as an unexpected error: the host read a bare
 * "internal error", nothing it could act on. The erase stopped before the database's rows went.
 */
function eraseFailed(err: unknown, dataDir: string, what: "delete" | "edit"): unknown {
  const e = err as NodeJS.ErrnoException | undefined;
  if (isCoreError(err) || typeof e?.code !== "string" || typeof e.path !== "string") return err;
  return new CoreError(
    "internal_error",
    `the 0.1 data at ${e.path} in the data directory ${dataDir} (app.data_dir) could not be erased: ${fsProblemText(e.code)}; the ${what} stopped before its rows in the database were erased: send it again once that is fixed`,
    { key: "app.data_dir", path: dataDir, file: e.path, problem: e.code },
  );
}

/**
 * An edit's commit (`replace_from`, `regenerate`): the erase of the turns it replaces from the 0.1
 * files, run before the commit as a delete's is (a core killed between leaves them erased); else
 * undefined. An edit whose commit is then refused (its session deleted, another core's) took them
 * all the same: they are the text the user asked to replace, and the database keeps its own.
 */
export function editErase(dataDir: string, work: OffLoopWrite): V01Work | undefined {
  if (work.kind !== "commit" || work.turn.replaceFromSeq === undefined) return undefined;
  const { userId, sessionId, replaceFromSeq: seq } = work.turn;
  return { kind: "edit", dataDir, userId, sessionId, seq };
}

export interface ImportRun {
  dataDir: string;
  /** A step, on the store's thread or here. */
  run: (work: V01Work) => Promise<V01Result>;
  /** The store is stopping: no further unit is begun (the next start goes on from there). */
  stopped: () => boolean;
  now: () => Date;
  /** Tests: awaited before each unit is begun (`user/session`, or `user` for its memory file). */
  beforeUnit?: (unit: string) => Promise<void>;
}

/**
 * The import, one unit at a time, then the marker. Between the units this loop is free: the
 * store's thread does the reading and writing.
 */
export async function runImport(r: ImportRun): Promise<void> {
  const { units, mark } = (await r.run({ kind: "list", dataDir: r.dataDir })) as {
    units: V01Unit[];
    mark: number;
  };
  const report = emptyReport();
  for (const unit of units) {
    if (r.stopped()) return;
    await r.beforeUnit?.(unit.session === undefined ? unit.user : `${unit.user}/${unit.session}`);
    if (r.stopped()) return;
    const work = { kind: "unit", dataDir: r.dataDir, unit, mark, at: r.now().getTime() } as const;
    const done = (await r.run(work)) as ImportReport | "done";
    // Another core on the folder finished it (and moves the folder aside).
    if (done === "done") return;
    report.sessions += done.sessions;
    report.checkpoints += done.checkpoints;
    report.memory += done.memory;
    report.skipped.push(...done.skipped);
    // At once: the unit is recorded, and an import stopped before its end, resumed, reads it no more.
    if (done.skipped.length)
      logger.warn(
        `0.1 files not imported, kept as they were (in ${IMPORTED_DIR}/ once all is imported): ${done.skipped.join(", ")}`,
      );
  }
  if (r.stopped()) return;
  if (!(await r.run({ kind: "finish", dataDir: r.dataDir, at: r.now().getTime() }))) return;
  logger.info(
    `imported the 0.1 data folder: ${report.sessions} sessions, ${report.checkpoints} interrupted turns, ${report.memory} memory entries${report.skipped.length ? `; ${report.skipped.length} files not imported (warned of above)` : ""}`,
  );
}

/**
 * Starts the import when one is to run (import-v01.ts `importNeeded`), as `queue` runs it (the
 * store's erase queue: this core's writes, leases and erases wait for it). Resolves once it is
 * done or given up; never rejects.
 */
export function startImport(
  db: Database,
  r: ImportRun & { queue: (job: () => Promise<void>) => Promise<void> },
): Promise<void> {
  const failed = (err: unknown) => {
    // What was imported stays; the next start goes on from there.
    if (!r.stopped()) logger.warn(`the 0.1 data folder could not be imported: ${(err as Error).message}`);
  };
  try {
    if (!importNeeded(db, r.dataDir, r.now())) return Promise.resolve();
    return r.queue(() => runImport(r)).catch(failed);
  } catch (err) {
    failed(err);
    return Promise.resolve();
  }
}
