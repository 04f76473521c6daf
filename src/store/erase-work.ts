import type { Database } from "bun:sqlite";
import type { CheckpointWrite } from "./checkpoint-rows.ts";
import { type CommitTurn, Conversations } from "./conversations.ts";
import { forgetStaleKeys } from "./db/fts-forget.ts";
import { DocumentStore } from "./document-store.ts";
import {
  eraseInSteps,
  eraseSession,
  eraseUser,
  rewriteOwed,
  settleErase,
  settleOwed,
  truncateWal,
} from "./erase.ts";
import { type CopyOutcome, eraseDocumentFromCopies, eraseFromCopies } from "./erase-copies.ts";
import type { TurnMark } from "./turn-mark.ts";

/**
 * One erase as plain data, so it can run on the store's thread (store/chunk-thread.ts) as well as
 * on the main one: with FTS5's `secure-delete` an erase costs seconds per few hundred messages,
 * which the main loop must not wait out (ping, cancel, shutdown answer at once). An edit's commit
 * (`replace_from`, `regenerate`) is one too: it erases the tail it replaces.
 * `steps`: the full-disk way (store/erase.ts `eraseInSteps`; a discard's batch likewise). `discard`: one batch of the chunk
 * rows of an add that never committed (store/orphan-sweep.ts `discardPaced`), the log emptied
 * after the last (`removedBefore`: what the batches before it removed). `owed`: the pages' rewrite
 * an earlier erase could not do (store/erase.ts `oweRewrite`), asked at open. `checkpoint`: a
 * turn's checkpoint that writes its long input kept apart (megabytes: 57–80 ms for 8 MiB), under
 * the turn's checks (Conversations.saveCheckpoint).
 */
export type EraseWork =
  | { kind: "session"; userId: string; sessionId: string; at: number; steps: boolean }
  | { kind: "user"; userId: string; at: number; steps: boolean }
  | { kind: "document"; userId: string; documentId: string }
  | { kind: "copies"; dataDir: string; userId: string; sessionId?: string; documentId?: string }
  | { kind: "commit"; turn: CommitTurn }
  | {
      kind: "checkpoint";
      key: CheckpointKey;
      write: CheckpointWrite;
      at: Date;
      mark: TurnMark;
      keepStaged?: number[];
      /** A new session's row, made in the same write (agent/turn/session.ts `stageIn`). */
      opens?: { agent: string };
    }
  | { kind: "discard"; documentId: string; rows: number; removedBefore: number; steps: boolean }
  | { kind: "owed" };

/** The writes (not erases) that run off the loop as one does (Store.writeOffLoop). */
export type OffLoopWrite = Extract<EraseWork, { kind: "commit" | "checkpoint" }>;

/** Whose checkpoint. */
interface CheckpointKey {
  userId: string;
  sessionId: string;
}

/** What each kind answers: sessions (or documents) removed; for `copies`, each copy's outcome; a commit's first seq. */
export type EraseResult = number | CopyOutcome[];

export function runErase(db: Database, work: EraseWork): EraseResult {
  switch (work.kind) {
    case "session":
      if (work.steps) return eraseInSteps(db, work.userId, work.sessionId, work.at);
      return eraseSession(db, work.userId, work.sessionId, work.at) ? 1 : 0;
    case "user":
      if (work.steps) return eraseInSteps(db, work.userId, undefined, work.at);
      return eraseUser(db, work.userId, work.at);
    case "document": {
      const removed = new DocumentStore(db).delete(work.userId, work.documentId);
      if (removed) settleErase(db, true);
      return removed ? 1 : 0;
    }
    case "commit": {
      const first = new Conversations(db).commitTurn(work.turn);
      // An edit that took images away owes their pages' rewrite (store/attachments.ts `settle`).
      if (rewriteOwed(db)) settleErase(db, true);
      return first;
    }
    case "checkpoint": {
      const { key, write, at, mark, keepStaged, opens } = work;
      const conversations = new Conversations(db);
      db.transaction(() => {
        const input = typeof write.input === "object" ? write.input.text : "";
        if (opens) conversations.ensureSession(key.userId, key.sessionId, opens.agent, input, at, mark.since);
        conversations.saveCheckpoint(key.userId, key.sessionId, write, at, mark, keepStaged);
      }).immediate();
      return 0;
    }
    case "discard": {
      // On a full disk the log is emptied around each batch, as eraseInSteps does.
      if (work.steps) truncateWal(db);
      const n = new DocumentStore(db).discard(work.documentId, work.rows);
      const last = n < work.rows && work.removedBefore + n > 0;
      if (last) forgetStaleKeys(db, ["memory_fts"]);
      if (work.steps || last) settleErase(db);
      return n;
    }
    case "owed":
      // A rewrite an erase owes (store/erase.ts oweRewrite), done at open: seconds on a big database.
      return settleOwed(db) ? 1 : 0;
    case "copies":
      return work.documentId === undefined
        ? eraseFromCopies(work.dataDir, work.userId, work.sessionId)
        : eraseDocumentFromCopies(work.dataDir, work.userId, work.documentId);
  }
}
