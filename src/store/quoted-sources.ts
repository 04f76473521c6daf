import type { Database } from "bun:sqlite";

/**
 * Of the sources memory notes quote (docs/agent.md#prompt-reuse: `session:<id>`, `document:<id>`,
 * `file:<path>`, each with the memory rows of its passages), those no longer in the database:
 * another core on the same data folder may have erased them. A session and a document by the
 * user's row (their primary keys); a folder's file by its passages' rows (`memory.id`), which a
 * file removed or changed loses (its new passages are new rows). One indexed lookup a source; a
 * source of another kind cannot be vouched for, and counts as gone.
 */
export function goneSources(
  db: Database,
  userId: string,
  quoted: ReadonlyMap<string, readonly number[]>,
): string[] {
  const session = db.query("SELECT 1 FROM sessions WHERE user_id = ? AND session_id = ?");
  const document = db.query("SELECT 1 FROM documents WHERE user_id = ? AND document_id = ?");
  const file = db.query(
    "SELECT 1 FROM memory WHERE id IN (SELECT value FROM json_each(?)) AND user_id = '' AND source = ? LIMIT 1",
  );
  const stored = (source: string, rows: readonly number[]): boolean => {
    const at = source.indexOf(":");
    const id = source.slice(at + 1);
    switch (source.slice(0, at)) {
      case "session":
        return session.get(userId, id) !== null;
      case "document":
        return document.get(userId, id) !== null;
      case "file":
        return file.get(JSON.stringify(rows), source) !== null;
      default:
        return false;
    }
  };
  return [...quoted].flatMap(([source, rows]) => (stored(source, rows) ? [] : [source]));
}
