import type { Database } from "bun:sqlite";

/**
 * The 0.1 import's records in `meta` (store/import-v01.ts): `import_v01:<user>/<session>` for a
 * session's folder, `import_v01:<user>` for the user's memory file, each written with its unit
 * and all dropped with the marker. Until then they name the user and session as the host gave
 * them (an email address, say), so an erase drops those of what it erases (store/erase.ts): an
 * import that gave up would otherwise keep a deleted user's id readable on disk.
 */
export const UNIT_PREFIX = "import_v01:";

export const unitKey = (user: string, session?: string): string =>
  `${UNIT_PREFIX}${user}${session === undefined ? "" : `/${session}`}`;

/**
 * `import_v01_seq:<user>/<session>`: the seq the session's 0.1 turns begin at, where a start
 * imported them after 1.0 turns of the session (an import that gave up before its folder, a
 * chat on that id meanwhile); none: 0. Kept past the marker, for an edit's erase of the kept
 * files (import-v01-erase.ts), whose history counts from its own first message; an erase drops it.
 */
const BASE_PREFIX = "import_v01_seq:";
const baseKey = (user: string, session: string): string => `${BASE_PREFIX}${user}/${session}`;

/** In the unit's transaction, before its turns are written: the session's next seq, recorded when past 0. */
export function recordBase(db: Database, user: string, session: string): number {
  const { next } = db
    .query("SELECT COALESCE(MAX(seq), -1) + 1 AS next FROM messages WHERE user_id = ? AND session_id = ?")
    .get(user, session) as { next: number };
  if (next > 0)
    db.query("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)").run(baseKey(user, session), `${next}`);
  return next;
}

/** The seq the session's imported 0.1 turns begin at (recordBase). */
export function importedBase(db: Database, user: string, session: string): number {
  const row = db.query("SELECT value FROM meta WHERE key = ?").get(baseKey(user, session)) as {
    value: string;
  } | null;
  return row === null ? 0 : Number(row.value) || 0;
}

/** In the erase's transaction: the records of the session, or of all the user's units. */
export function dropUnitRecords(db: Database, userId: string, sessionId?: string): void {
  if (sessionId !== undefined) {
    db.query("DELETE FROM meta WHERE key IN (?, ?)").run(
      unitKey(userId, sessionId),
      baseKey(userId, sessionId),
    );
    return;
  }
  const sessions = `${unitKey(userId)}/`;
  const bases = `${BASE_PREFIX}${userId}/`;
  db.query("DELETE FROM meta WHERE key = ? OR substr(key, 1, ?) = ? OR substr(key, 1, ?) = ?").run(
    unitKey(userId),
    sessions.length,
    sessions,
    bases.length,
    bases,
  );
}

/**
 * How many of a kept history's first `upTo` messages the database still holds as the import put
 * them, at their seqs from `base` (same role and words): where an edit's erase must cut at the
 * latest. The files disagree where an older version left them behind: one that imported after
 * 1.0 turns wrote no base (every 0.1 turn then taken as replaced), one whose edit left the
 * replaced turns in them. A cut lower than the edit's own only erases more of a copy.
 */
export function heldPrefix(
  db: Database,
  work: { userId: string; sessionId: string; base: number },
  messages: readonly { role: string; content: string | null }[],
  upTo: number,
): number {
  const rows = db
    .query(
      `SELECT seq, role, content FROM messages WHERE user_id = ? AND session_id = ? AND seq >= ? AND seq < ?
       ORDER BY seq`,
    )
    .iterate(work.userId, work.sessionId, work.base, work.base + upTo) as Iterable<{
    seq: number;
    role: string;
    content: string | null;
  }>;
  let i = 0;
  for (const r of rows) {
    const m = messages[i];
    if (r.seq !== work.base + i || m === undefined || r.role !== m.role || r.content !== m.content) return i;
    i++;
  }
  return i;
}
