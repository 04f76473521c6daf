import type { Database } from "bun:sqlite";

/**
 * An edit's (`replace_from`, `regenerate`) erase of the 0.1 memory entries of the turns it
 * replaces, in its transaction, before the messages go. A 0.1 entry names its session but no turn
 * (seq NULL, store/import-v01.ts), so it is told by its text, which 0.1 wrote as the turn's input,
 * a newline and its answer: an entry starting with a replaced user message's words and a newline
 * goes. An earlier turn of the same words loses its entry too (memory is a recall aid; the
 * replaced text must not come back). An edit from the first message replaces every turn: all go.
 */
export function dropImportedMemory(db: Database, userId: string, sessionId: string, seq: number): void {
  const source = `session:${sessionId}`;
  if (seq === 0) {
    db.query("DELETE FROM memory WHERE user_id = ? AND session_id = ? AND seq IS NULL AND source = ?").run(
      userId,
      sessionId,
      source,
    );
    return;
  }
  const inputs = new Set(
    (
      db
        .query(
          `SELECT content FROM messages WHERE user_id = ? AND session_id = ? AND seq >= ? AND role = 'user'
           AND by_core = 0 AND content IS NOT NULL`,
        )
        .all(userId, sessionId, seq) as { content: string }[]
    ).map((m) => m.content),
  );
  if (inputs.size === 0) return;
  const entries = db
    .query("SELECT id, text FROM memory WHERE user_id = ? AND session_id = ? AND seq IS NULL AND source = ?")
    .all(userId, sessionId, source) as { id: number; text: string }[];
  const drop = db.query("DELETE FROM memory WHERE id = ?");
  for (const e of entries) if (startsWithInput(e.text, inputs)) drop.run(e.id);
}

/**
 * Whether `text` is one of `inputs`, a newline and more: looked up at each newline, in one pass.
 * SQL compared every entry with every replaced message, a cost growing with the square of the
 * turns (1.5 s for 3,000 here, in the edit's write lock, every other write of the core waiting),
 * and its `length` stops at a NUL, so an input holding one never matched its entry, which stayed.
 */
export function startsWithInput(text: string, inputs: ReadonlySet<string>): boolean {
  for (let at = text.indexOf("\n"); at >= 0; at = text.indexOf("\n", at + 1))
    if (inputs.has(text.slice(0, at))) return true;
  return false;
}
