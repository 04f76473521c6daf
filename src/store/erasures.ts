import type { Database } from "bun:sqlite";
import { createHmac } from "node:crypto";
import { CoreError } from "../protocol/errors.ts";

/**
 * A delete wins over a turn in flight (docs/agent.md, The store): each erase records a row in
 * `erasures` (ids and a time, never text), numbered in order. A turn notes the newest number
 * when it begins (`erasureMark`); every write of the turn checks, inside its own transaction,
 * that no erase of its session or its user came after that mark, so a turn of this core or of
 * another on the same folder cannot write a deleted session back. Within the process the turn
 * is also stopped at once (`ErasureWatch`).
 *
 * The rows are kept ERASURE_KEEP_MS, long past any turn, then pruned with the next erase; a
 * turn older than the rows pruned is refused as if its session were erased (it cannot be told).
 *
 * A row names its user and session by a keyed hash (`idKey`), never as the host gave them: a
 * user id may be an email address, and `users.delete` leaves nothing of the user readable on disk
 * (docs/agent.md "The store"), while a row outlives the erase by a day, or until the next erase.
 */
export const ERASURE_KEEP_MS = 24 * 60 * 60 * 1000;

/** The number of the newest erase ever recorded (0 for none), pruned or not. */
export function erasureMark(db: Database): number {
  const row = db.query("SELECT seq FROM sqlite_sequence WHERE name = 'erasures'").get() as {
    seq: number;
  } | null;
  return row?.seq ?? 0;
}

/**
 * No erase of any kind recorded after `mark`: the numbers only rise (AUTOINCREMENT), so none of
 * the rows `erasedSince` and `editedSince` look for can exist, nor a prune past it. One lookup in
 * place of their two or three and five keyed hashes, on every warm chat's way (its lease's write,
 * the slot it takes: docs/performance.md, "The core's own path against 2026-12-05's build").
 */
function noneSince(db: Database, mark: number): boolean {
  return erasureMark(db) <= mark;
}

/** Each database's key for `idKey` (meta `erasure_key`, random, made by migration 6). */
const keys = new WeakMap<Database, string>();

/**
 * A user id, or a user's session id, as `erasures` keeps it: HMAC-SHA256 under the database's own
 * key, 128 bits. Someone with the file can test a guess, but reads no id from it.
 */
function idKey(db: Database, userId: string, sessionId?: string, kind: "s" | "e" | "a" = "s"): string {
  let key = keys.get(db);
  if (key === undefined) {
    const row = db.query("SELECT value FROM meta WHERE key = 'erasure_key'").get() as {
      value: string;
    } | null;
    key = row?.value ?? "";
    keys.set(db, key);
  }
  const id = sessionId === undefined ? `u\0${userId}` : `${kind}\0${userId}\0${sessionId}`;
  return createHmac("sha256", key).update(id).digest("hex").slice(0, 32);
}

/**
 * Called inside the erase's transaction: the erase recorded, rows past their keep pruned. With
 * `edit`, an edit's erase of the session's tail (`replace_from`, `regenerate`): a row of its own
 * kind (`editedSince`), which no turn's write is refused for (its session lives on), but a KV
 * slot's save of the session from before it is (agent/kv/reuse.ts: the slot holds the tail).
 * `"set_aside"`: a turn set an interrupted one aside, no message erased: a KV slot's save is
 * refused as for an edit, a search's hits are not (`editedSince`'s `messages`).
 * Returns the row's number.
 */
export function recordErasure(
  db: Database,
  userId: string,
  sessionId: string | undefined,
  at: number,
  edit: boolean | "set_aside" = false,
): number {
  const kind = edit === "set_aside" ? "a" : edit ? "e" : "s";
  const { lastInsertRowid } = db
    .query("INSERT INTO erasures (user_id, session_id, at) VALUES (?, ?, ?)")
    .run(idKey(db, userId), sessionId === undefined ? "" : idKey(db, userId, sessionId, kind), at);
  const old = db.query("SELECT MAX(id) AS id FROM erasures WHERE at < ?").get(at - ERASURE_KEEP_MS) as {
    id: number | null;
  };
  if (old.id !== null) prune(db, old.id);
  // Rows a core of a version before migration 6, running on the same folder, wrote with the ids
  // as given: pruned too, with the same rule for the turns begun before them.
  const plain = db.query(`SELECT MAX(id) AS id FROM erasures WHERE ${NOT_HASHED}`).get() as {
    id: number | null;
  };
  if (plain.id !== null) prune(db, plain.id);
  return Number(lastInsertRowid);
}

/** A row whose user is not a key of `idKey` (32 hex digits): written by a core before migration 6. */
const NOT_HASHED = "(length(user_id) <> 32 OR user_id GLOB '*[^0-9a-f]*')";

/** Rows through `id` dropped; a turn begun before them is refused from then on, as it cannot be told. */
function prune(db: Database, id: number): void {
  db.query("DELETE FROM erasures WHERE id <= ?").run(id);
  db.query(
    `INSERT INTO meta (key, value) VALUES ('erasures_pruned_through', ?)
     ON CONFLICT (key) DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))`,
  ).run(String(id));
}

/** Whether the session (or its user) was erased after `mark`; called inside the writing transaction. */
export function erasedSince(db: Database, userId: string, sessionId: string, mark: number): boolean {
  if (noneSince(db, mark)) return false;
  const pruned = db.query("SELECT value FROM meta WHERE key = 'erasures_pruned_through'").get() as {
    value: string;
  } | null;
  if (pruned && Number(pruned.value) > mark) return true;
  // The ids as given too: a core of a version before migration 6 on the same folder records them so.
  const hit = db
    .query(
      `SELECT 1 FROM erasures WHERE id > ? AND
         ((user_id = ? AND session_id IN ('', ?)) OR (user_id = ? AND session_id IN ('', ?))) LIMIT 1`,
    )
    .get(mark, idKey(db, userId), idKey(db, userId, sessionId), userId, sessionId);
  return hit !== null;
}

/**
 * Whether the session (or its user) was erased, or an edit erased its tail, or a turn set an
 * interrupted one aside, after `mark`: a KV slot's state of it from then holds what went, another
 * core's edit's included. `messages`: only what erased messages (a search's hits), not a set-aside.
 */
export function editedSince(
  db: Database,
  userId: string,
  sessionId: string,
  mark: number,
  messages = false,
): boolean {
  if (noneSince(db, mark)) return false;
  if (erasedSince(db, userId, sessionId, mark)) return true;
  const edit = idKey(db, userId, sessionId, "e");
  const hit = db
    .query("SELECT 1 FROM erasures WHERE id > ? AND user_id = ? AND session_id IN (?, ?) LIMIT 1")
    .get(mark, idKey(db, userId), edit, messages ? edit : idKey(db, userId, sessionId, "a"));
  return hit !== null;
}

/** Throws `sessionErased` when a write of a turn begun at `mark` would bring the session back. */
export function refuseIfErased(
  db: Database,
  userId: string,
  sessionId: string,
  mark: number | undefined,
): void {
  if (mark !== undefined && erasedSince(db, userId, sessionId, mark)) throw sessionErased(sessionId);
}

/** A turn's end when its user was deleted before it named its session: nothing of it was kept. */
export function userErased(): CoreError {
  return new CoreError(
    "cancelled",
    "the user's data was deleted while this turn ran; nothing of the turn was kept",
    {
      reason: "user_deleted",
    },
  );
}

/** A turn's end when its session was deleted while it ran: nothing of it was kept. */
export function sessionErased(sessionId: string): CoreError {
  return new CoreError(
    "cancelled",
    `session '${sessionId}' was deleted while this turn ran; nothing of the turn was kept`,
    { reason: "session_deleted", session_id: sessionId },
  );
}

interface Watcher {
  userId: string;
  sessionId: string;
  onErase: () => void;
}

/**
 * The turns of this process, stopped when their session or user is erased. One per process
 * (server/services.ts), not per opened database: a chat watches from its arrival, before the
 * database is opened, and a database reopened under the core keeps the watchers.
 */
export class ErasureWatch {
  private readonly watchers = new Set<Watcher>();

  /** Calls `onErase` when the session is erased; returns the unwatch. */
  watch(userId: string, sessionId: string, onErase: () => void): () => void {
    const w = { userId, sessionId, onErase };
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /**
   * A signal aborted, with the delete's reason, when the session or its user is erased. Without a
   * session (a chat that names none, before its id is made): when the user is.
   */
  signal(userId: string, sessionId?: string): { signal: AbortSignal; unwatch: () => void } {
    const erased = new AbortController();
    const reason = () => (sessionId === undefined ? userErased() : sessionErased(sessionId));
    // "" is no session's id (SafeIdSchema): only an erase of the whole user reaches it.
    const unwatch = this.watch(userId, sessionId ?? "", () => erased.abort(reason()));
    return { signal: erased.signal, unwatch };
  }

  erased(userId: string, sessionId?: string): void {
    for (const w of [...this.watchers]) {
      if (w.userId !== userId || (sessionId !== undefined && w.sessionId !== sessionId)) continue;
      this.watchers.delete(w);
      w.onErase();
    }
  }
}
