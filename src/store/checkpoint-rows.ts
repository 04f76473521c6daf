import type { Database } from "bun:sqlite";

/**
 * A checkpoint to save: its body, and its input when kept apart (store/checkpoint.ts
 * `checkpointBody`): written with it, or `kept` as an earlier save of the turn wrote it.
 */
export interface CheckpointWrite {
  body: string;
  input?: { text: string } | "kept";
}

/** Writes the session's checkpoint, in the caller's transaction. */
export function putCheckpoint(
  db: Database,
  userId: string,
  sessionId: string,
  write: string | CheckpointWrite,
  at: Date,
): void {
  const { body, input } = typeof write === "string" ? { body: write, input: undefined } : write;
  db.query(
    `INSERT INTO checkpoints (user_id, session_id, body, updated_at) VALUES (?, ?, ?, ?)
     ON CONFLICT (user_id, session_id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at`,
  ).run(userId, sessionId, body, at.getTime());
  // Kept as an earlier save of the turn wrote it; else written now, or (a body that holds its
  // input) any an earlier checkpoint kept apart goes: no stale copy of it stays.
  if (input === "kept") return;
  if (input === undefined)
    db.query("DELETE FROM checkpoint_inputs WHERE user_id = ? AND session_id = ?").run(userId, sessionId);
  else
    db.query(
      `INSERT INTO checkpoint_inputs (user_id, session_id, input) VALUES (?, ?, ?)
       ON CONFLICT (user_id, session_id) DO UPDATE SET input = excluded.input`,
    ).run(userId, sessionId, input.text);
}

/** The input a checkpoint's body keeps apart (store/checkpoint.ts `withInput`). */
export function checkpointInput(db: Database, userId: string, sessionId: string): string | undefined {
  const row = db
    .query("SELECT input FROM checkpoint_inputs WHERE user_id = ? AND session_id = ?")
    .get(userId, sessionId) as { input: string } | null;
  return row?.input;
}
