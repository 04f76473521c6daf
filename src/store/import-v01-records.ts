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

/** In the erase's transaction: the records of the session, or of all the user's units. */
export function dropUnitRecords(db: Database, userId: string, sessionId?: string): void {
  if (sessionId !== undefined) {
    db.query("DELETE FROM meta WHERE key = ?").run(unitKey(userId, sessionId));
    return;
  }
  const sessions = `${unitKey(userId)}/`;
  db.query("DELETE FROM meta WHERE key = ? OR substr(key, 1, ?) = ?").run(
    unitKey(userId),
    sessions.length,
    sessions,
  );
}
