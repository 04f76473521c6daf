import type { Warning } from "../../protocol/chat.ts";
import { type Checkpoint, CheckpointSchema, withInput } from "../../store/checkpoint.ts";
import type { Store } from "../../store/store.ts";
import { logger } from "../../util/logger.ts";
import type { SessionKey } from "../kv/session-key.ts";

/**
 * The session's checkpoint; one that does not parse (another version wrote it) is dropped with a
 * warning: `"dropped"`, its turn then set aside as a discarded one is (agent/turn/session.ts).
 */
export function readCheckpoint(
  store: Store,
  key: SessionKey,
  warnings: Warning[],
): Checkpoint | "dropped" | undefined {
  const body = store.conversations.checkpoint(key.userId, key.sessionId);
  if (body === undefined) return undefined;
  let problem: string;
  try {
    // A long input is kept apart from the body (store/checkpoint.ts); an earlier version's body holds it.
    const raw = withInput(JSON.parse(body), () =>
      store.conversations.checkpointInput(key.userId, key.sessionId),
    );
    if (raw === undefined) problem = "its input, kept apart, could not be read";
    else {
      const parsed = CheckpointSchema.safeParse(raw);
      if (parsed.success) return parsed.data;
      const issue = parsed.error.issues[0];
      problem = `unexpected shape at '${issue?.path.join(".") ?? ""}': ${issue?.message ?? "invalid"}`;
    }
  } catch {
    // Not the parser's message: it quotes a token of the text, which may be the user's words,
    // and this line goes to the log (docs/supervisor.md "No conversation in the log").
    problem = "not valid JSON";
  }
  logger.warn(`the checkpoint of session ${key.sessionId} was unreadable (${problem}); dropped`);
  warnings.push({
    code: "checkpoint_reset",
    message: `the interrupted turn's checkpoint could not be read (${problem}); it was dropped and the turn started afresh`,
  });
  store.conversations.clearCheckpoint(key.userId, key.sessionId);
  return "dropped";
}
