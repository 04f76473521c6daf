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
  const read = parseCheckpoint(store, key);
  if (read === undefined || !("problem" in read)) return read;
  const { problem } = read;
  logger.warn(`the checkpoint of session ${key.sessionId} was unreadable (${problem}); dropped`);
  warnings.push({
    code: "checkpoint_reset",
    message: `the interrupted turn's checkpoint could not be read (${problem}); it was dropped and the turn started afresh`,
  });
  store.conversations.clearCheckpoint(key.userId, key.sessionId);
  return "dropped";
}

/**
 * Whether the session has an interrupted turn a resume continues: a checkpoint that reads (one
 * that does not is dropped, and the chat runs as a new turn). Nothing is written or warned.
 */
export function hasInterruptedTurn(store: Store, key: SessionKey): boolean {
  const read = parseCheckpoint(store, key);
  return read !== undefined && !("problem" in read);
}

/** The session's checkpoint as read, or what is wrong with it; undefined where it has none. */
function parseCheckpoint(store: Store, key: SessionKey): Checkpoint | { problem: string } | undefined {
  const body = store.conversations.checkpoint(key.userId, key.sessionId);
  if (body === undefined) return undefined;
  try {
    // A long input is kept apart from the body (store/checkpoint.ts); an earlier version's body holds it.
    const raw = withInput(JSON.parse(body), () =>
      store.conversations.checkpointInput(key.userId, key.sessionId),
    );
    if (raw === undefined) return { problem: "its input, kept apart, could not be read" };
    const parsed = CheckpointSchema.safeParse(raw);
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    return {
      problem: `unexpected shape at '${issue?.path.join(".") ?? ""}': ${issue?.message ?? "invalid"}`,
    };
  } catch {
    // Not the parser's message: it quotes a token of the text, which may be the user's words,
    // and this line goes to the log (docs/supervisor.md "No conversation in the log").
    return { problem: "not valid JSON" };
  }
}
