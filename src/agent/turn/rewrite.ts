import type { ChatParams } from "../../protocol/chat.ts";
import type { AttachmentRef, ChatMessage } from "../../protocol/chat-message.ts";
import { CoreError } from "../../protocol/errors.ts";
import type { KeyedMutex, Place } from "../../store/keyed-mutex.ts";
import type { Store } from "../../store/store.ts";
import type { SessionKey } from "../kv/session-key.ts";
import { isWriteAgain } from "../write-again.ts";

/**
 * `regenerate` and `replace_from` (docs/protocol.md#conversations-sessions-and-usersdelete): a turn
 * that replaces the session's tail instead of appending to it. What the params alone can refuse is
 * refused before anything starts (`checkRewriteParams`); what needs the session, under its lock
 * (`planRewrite`).
 */
export interface Rewrite {
  /** The session's messages from this seq on are replaced by the turn. */
  replaceFromSeq: number;
  /** The user message the turn runs. */
  input: string;
  /** The images it keeps from the message it replaces (docs/protocol.md#images). */
  carried: AttachmentRef[];
}

const refuse = (field: string, message: string, data: Record<string, unknown> = {}) =>
  new CoreError("invalid_request", `params.${field}: ${message}`, { field, ...data });

/** A chat that changes its session's last turn (`regenerate`, `replace_from`) rather than adding one. */
export function isRewrite(params: ChatParams): boolean {
  return params.regenerate === true || params.replace_from !== undefined;
}

export function checkRewriteParams(params: ChatParams): void {
  const edit = params.replace_from !== undefined;
  if (!params.regenerate && !edit) return;
  if (params.regenerate && edit) throw refuse("regenerate", "regenerate and replace_from cannot be combined");
  if (params.resume)
    throw refuse("resume", `resume cannot be combined with ${edit ? "replace_from" : "regenerate"}`);
  if (params.session_id === undefined)
    throw refuse(
      "session_id",
      `${edit ? "replace_from" : "regenerate"} needs the session_id of the session to change`,
    );
  if (params.regenerate && params.input !== "")
    throw refuse("input", "must be empty with regenerate (the session's last user message is run again)");
  // Any images key, even empty: on an edit `[]` takes images away, so here it would seem to.
  if (params.regenerate && params.images !== undefined)
    throw refuse("images", "must be empty with regenerate (the last user message's images are sent again)");
  if (edit && params.input === "") throw refuse("input", "the edited user message must not be empty");
}

/** The rewrite the params ask for, checked against the session; undefined for a plain turn. */
export function planRewrite(params: ChatParams, store: Store, key: SessionKey): Rewrite | undefined {
  if (!params.regenerate && params.replace_from === undefined) return undefined;
  const session = store.guard(() => store.conversations.session(key.userId, key.sessionId));
  // A session with only an interrupted turn is one (sessions.list and .get show it): no user
  // message of it is refused below, not named unknown, which a host would drop from its list.
  if (!session) {
    throw new CoreError("invalid_request", `params.session_id: no session '${key.sessionId}' for this user`, {
      field: "session_id",
      reason: "session_not_found",
    });
  }
  // The user's own messages: a request to write again, though a user message, is the core's.
  const history = store.guard(() => store.conversations.history(key.userId, key.sessionId));
  const users = history.flatMap((m, seq) => (m.role === "user" && !isWriteAgain(m) ? [seq] : []));
  if (params.regenerate) {
    const last = users.at(-1);
    if (last === undefined) throw refuse("regenerate", "the session has no user message to answer again");
    const message = history[last] as ChatMessage & { role: "user" };
    return { replaceFromSeq: last, input: message.content, carried: message.attachments ?? [] };
  }
  const seq = params.replace_from as number;
  const replaced = users.includes(seq) ? (history[seq] as ChatMessage & { role: "user" }) : undefined;
  if (!replaced) {
    throw refuse(
      "replace_from",
      `seq ${seq} is not a user message of this session (its user messages: ${seqList(users)})`,
      {
        seq,
      },
    );
  }
  // An edit keeps the replaced message's images when it says nothing of images; a list, even an
  // empty one, replaces them, so a user can take back a photo attached by mistake.
  const carried = params.images !== undefined ? [] : (replaced.attachments ?? []);
  return { replaceFromSeq: seq, input: params.input, carried };
}

/**
 * The chat's place in its session's line, taken as it arrives (docs/agent.md, chats on one
 * session): a chat sent after it, which may wait for nothing first (the server already starting),
 * then runs after it, not before. A rewrite of a session with a turn in flight is refused here.
 */
export function takePlace(
  params: ChatParams,
  locks: KeyedMutex,
  signal: AbortSignal,
  sessionId: string,
): Place {
  checkRewriteParams(params);
  const key = `${params.user_id}/${sessionId}`;
  if (isRewrite(params) && locks.held(key)) throw turnInFlight(sessionId);
  return locks.place(key, signal);
}

/** A rewrite never waits behind another turn of its session: it is refused. */
export function turnInFlight(sessionId: string): CoreError {
  return refuse(
    "session_id",
    `a turn of session '${sessionId}' is in flight; wait for its result, or cancel it, then ask again`,
  );
}

/**
 * A session's user-message seqs for an error line: all of a few, else the first and last five
 * with the count, so a session of thousands of turns does not make a message of kilobytes.
 */
export function seqList(seqs: readonly number[]): string {
  if (seqs.length === 0) return "none";
  if (seqs.length <= 12) return seqs.join(", ");
  return `${seqs.slice(0, 5).join(", ")}, …, ${seqs.slice(-5).join(", ")} (${seqs.length} in all)`;
}
