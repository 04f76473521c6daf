import type { Database } from "bun:sqlite";

/**
 * Of the sources memory notes quote (docs/agent.md#prompt-reuse: `session:<id>`, `document:<id>`,
 * `file:<path>`, each with the memory rows of its passages), those no longer in the database:
 * another core on the same data folder may have erased them. A document by the user's row (its
 * chunks live and go with it); a session and a folder's file by every quoted passage's row
 * (`memory.id`): an edit (`replace_from`, `regenerate`) erases a session's tail, rows included,
 * and leaves its row, and a file removed or changed loses its rows (its new passages are new
 * rows; two folders may hold a file of the same name). One indexed lookup a source; a source
 * quoted without rows, or of another kind, cannot be vouched for, and counts as gone.
 */
export function goneSources(
  db: Database,
  userId: string,
  quoted: ReadonlyMap<string, readonly number[]>,
): string[] {
  const document = db.query("SELECT 1 FROM documents WHERE user_id = ? AND document_id = ?");
  const rows = db.query(
    "SELECT COUNT(*) AS n FROM memory WHERE id IN (SELECT value FROM json_each(?)) AND user_id = ? AND source = ?",
  );
  const allRows = (source: string, ids: readonly number[], owner: string): boolean => {
    const distinct = new Set(ids).size;
    const found = rows.get(JSON.stringify(ids), owner, source) as { n: number };
    return distinct > 0 && found.n === distinct;
  };
  const stored = (source: string, ids: readonly number[]): boolean => {
    const at = source.indexOf(":");
    switch (source.slice(0, at)) {
      case "session":
        return allRows(source, ids, userId);
      case "document":
        return document.get(userId, source.slice(at + 1)) !== null;
      case "file":
        return allRows(source, ids, "");
      default:
        return false;
    }
  };
  return [...quoted].flatMap(([source, ids]) => (stored(source, ids) ? [] : [source]));
}
