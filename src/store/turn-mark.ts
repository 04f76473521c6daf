import type { Database } from "bun:sqlite";
import { CoreError } from "../protocol/errors.ts";
import { refuseIfErased } from "./erasures.ts";

/**
 * What each write of a turn checks in its own transaction: no erase of its session since the turn
 * began (store/erasures.ts), and its lease still this process's. A core frozen past the lease's
 * TTL (a debugger, SIGSTOP, a paused VM) finds on waking that another core may have taken the
 * session over and begun a turn of its own: a checkpoint saved then would overwrite that turn's
 * (or pair with its input kept apart, store/checkpoint.ts), a commit land in its middle.
 */
export interface TurnMark {
  /** The erase mark when the turn began (`erasureMark`). */
  since: number;
  /** The turn's lease holder (`SessionLeases.owner`); none: a write outside any lease. */
  owner?: string;
}

/** Throws when a write of a turn begun at `mark` would land in an erased session or another core's turn. */
export function refuseStale(
  db: Database,
  userId: string,
  sessionId: string,
  mark: TurnMark | undefined,
): void {
  if (mark === undefined) return;
  refuseIfErased(db, userId, sessionId, mark.since);
  refuseIfTakenOver(db, userId, sessionId, mark.owner);
}

/**
 * Throws `sessionTakenOver` unless `owner` holds the session's lease (one lookup by its key). A
 * row gone counts as taken: the core that took it over finished and released it. An erase
 * removes the row too, which the erase check, made first, tells apart.
 */
export function refuseIfTakenOver(db: Database, userId: string, sessionId: string, owner?: string): void {
  if (owner === undefined) return;
  const row = db
    .query("SELECT owner FROM session_leases WHERE user_id = ? AND session_id = ?")
    .get(userId, sessionId) as { owner: string } | null;
  if (row === null || !sameHolder(row.owner, ownerId(owner))) throw sessionTakenOver(sessionId);
}

/**
 * Whether a lease's owner (`<pid>:<hex>@<pid space>`) is the holder `id` (`<pid>:<hex>`): its
 * space may have been read whole since (store/session-lease.ts `owner`), the holder the same.
 */
export function sameHolder(owner: string, id: string): boolean {
  return ownerId(owner) === id;
}

/** An owner's id: all before its space; an earlier version's owner (no space) whole. */
function ownerId(owner: string): string {
  const at = owner.lastIndexOf("@");
  return at < 0 ? owner : owner.slice(0, at);
}

/** A turn's end when another core took its session over (this one stalled past the lease's TTL). */
export function sessionTakenOver(sessionId: string): CoreError {
  return new CoreError(
    "invalid_request",
    `params.session_id: session '${sessionId}' was taken over by another process while this turn ran (this core stalled past its lease); nothing more of this turn was kept; read the session with sessions.get, then ask again`,
    { field: "session_id" },
  );
}
