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
  db.query(
    `DELETE FROM memory WHERE user_id = $u AND session_id = $s AND seq IS NULL AND source = $source
     AND EXISTS (SELECT 1 FROM messages m WHERE m.user_id = $u AND m.session_id = $s AND m.seq >= $seq
       AND m.role = 'user' AND m.by_core = 0 AND m.content IS NOT NULL
       AND substr(memory.text, 1, length(m.content) + 1) = m.content || char(10))`,
  ).run({ u: userId, s: sessionId, source, seq });
}
