import type { Database } from "bun:sqlite";
import type { ChatMessage } from "../protocol/chat-message.ts";
import type { Source } from "../protocol/sources.ts";
import type { Usage } from "../protocol/usage.ts";
import { Attachments } from "./attachments.ts";
import { type CheckpointWrite, checkpointInput, putCheckpoint } from "./checkpoint-rows.ts";
import { forgettingRows, indexedRows } from "./db/fts-forget.ts";
import { erasureMark, recordErasure, refuseIfErased } from "./erasures.ts";
import { dropImportedMemory } from "./import-v01-memory.ts";
import { NEW_MEMORY_ID } from "./memory-ids.ts";
import {
  type MessageRow,
  modelMessage,
  type SessionRow,
  type SessionSummary,
  summaryOf,
} from "./message-rows.ts";
import { SessionHistories } from "./session-histories.ts";
import { latestShownText } from "./session-pages.ts";
import { dropCitations, storedSources } from "./source-names.ts";
import { previewOf, titleOf } from "./title.ts";
import { refuseIfTakenOver, refuseStale, type TurnMark } from "./turn-mark.ts";

/** A message as the store keeps it: what the model saw, plus what only the host sees. */
export type TurnMessage = ChatMessage & {
  /** The model's thinking before this message (reasoning models); never sent back in later turns. */
  reasoning?: string;
  /** The step's token counts and timings (docs/agent.md#prompt-reuse), on assistant messages. */
  usage?: Usage;
  /** An answer's citations: what memory recalled for its turn. */
  sources?: Source[];
};

export interface CommitTurn {
  userId: string;
  sessionId: string;
  agent: string;
  /** The turn's messages in order, its user message first. */
  messages: readonly TurnMessage[];
  /** An edit or a regenerate: the messages from this seq on are replaced by the turn's. */
  replaceFromSeq?: number;
  /**
   * The turn set aside an interrupted one (`set_aside`): recorded as an edit's erase is, so no
   * core's KV slot holding that turn saves it back (store/erasures.ts `editedSince`).
   */
  setAside?: boolean;
  /** The turn as memory recalls it (user input and answer); none when memory is off. */
  memoryText?: string;
  at: Date;
  /** The erase mark when the turn began: refused if the session was erased since (store/erasures.ts). */
  since?: number;
  /** The turn's lease holder: refused if another core took the session over (store/session-lease.ts `TurnMark`). */
  owner?: string;
  /** What llama-server counted for each of the turn's images, by attachment id, where known. */
  imageTokens?: ReadonlyMap<number, number>;
}

/**
 * The text a turn's commit may have FTS5 index on the main loop: tokenizing costs ~15 ms a MiB
 * (its messages and its memory entry each), and a chat's input may be as long as a line
 * (stdio.max_line_bytes, 8 MiB: ~250 ms with its memory entry, ping and cancel unanswered).
 * Past this the commit runs on the store's thread (Store.writeOffLoop); a chat's usual turn,
 * far under it, spares the trip.
 */
const ON_LOOP_CHARS = 64 * 1024;

/** Whether the turn's commit indexes more than the main loop should (ON_LOOP_CHARS). */
export function indexesLong(turn: CommitTurn): boolean {
  let chars = turn.memoryText?.length ?? 0;
  for (const m of turn.messages) chars += (m.content?.length ?? 0) + (m.reasoning?.length ?? 0);
  return chars > ON_LOOP_CHARS;
}

/**
 * A session's new `updated_at`: now, or just after the user's latest when that is not earlier
 * (two turns in one millisecond, a clock set back), so "newest first" is the order they happened.
 */
const LATER = `MAX($at, COALESCE((SELECT MAX(updated_at) FROM sessions WHERE user_id = $u), 0) + 1)`;

/** The text a session's preview shows: the last message that has some (not the core's own). */
function previewText(messages: readonly TurnMessage[]): string | undefined {
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i] as TurnMessage;
    if ((m.role === "assistant" || (m.role === "user" && !m.by_core)) && m.content) return m.content;
  }
  return undefined;
}

/**
 * Sessions, their messages and their checkpoints in the database
 * (docs/protocol.md#conversations-sessions-and-usersdelete). Each turn is one transaction: its
 * messages, the session's counters and title, its memory entry and the end of its checkpoint land
 * together or not at all.
 */
export class Conversations {
  /** The messages' images (store/attachments.ts). */
  readonly attachments: Attachments;
  /** Recent sessions' histories as the model sees them (store/session-histories.ts). */
  readonly histories: SessionHistories;

  constructor(private readonly db: Database) {
    this.attachments = new Attachments(db);
    this.histories = new SessionHistories(db, this.attachments);
  }

  /** The model's history of a session, oldest first (empty for a new session). */
  history(userId: string, sessionId: string): ChatMessage[] {
    return this.histories.read(userId, sessionId);
  }

  /** Forgets a session's cached history (it was deleted). */
  forget(userId: string, sessionId?: string): void {
    this.histories.forget(userId, sessionId);
  }

  /**
   * A turn committed by another connection (the store's thread): the history cached here no
   * longer holds (its stamp moved), but an edit's erased tail stays in it until the session is
   * read again, which may be never. Dropped at once, as a deleted session's is.
   */
  uncache(work: { kind: string; turn?: { userId: string; sessionId: string } }): void {
    if (work.kind === "commit" && work.turn) this.forget(work.turn.userId, work.turn.sessionId);
  }

  session(userId: string, sessionId: string): SessionSummary | undefined {
    const row = this.db
      .query(
        `SELECT session_id, title, agent, created_at, updated_at, message_count, preview FROM sessions
         WHERE user_id = ? AND session_id = ?`,
      )
      .get(userId, sessionId) as SessionRow | null;
    return row ? summaryOf(row) : undefined;
  }

  /** Throws the turn's refusal (`sessionErased`…) where its session was erased or taken over since `mark`. */
  refuseStaleTurn(userId: string, sessionId: string, mark: TurnMark): void {
    refuseStale(this.db, userId, sessionId, mark);
  }

  /** The newest erase's number: a turn notes it when it begins (store/erasures.ts). */
  erasureMark(): number {
    return erasureMark(this.db);
  }

  /** Makes the session's row when missing (a first turn's checkpoint needs it). */
  ensureSession(
    userId: string,
    sessionId: string,
    agent: string,
    firstInput: string,
    at: Date,
    since?: number,
  ): void {
    refuseIfErased(this.db, userId, sessionId, since);
    this.db
      .query(
        `INSERT INTO sessions (user_id, session_id, title, agent, created_at, updated_at)
         VALUES ($u, $s, $title, $agent, $at, ${LATER}) ON CONFLICT DO NOTHING`,
      )
      .run({ u: userId, s: sessionId, title: titleOf(firstInput), agent, at: at.getTime() });
  }

  /**
   * A turn's first writes, in the caller's transaction: `ensureSession`, with `keepStaged` the
   * images an earlier, unfinished turn staged and this one does not carry dropped, and with
   * `checkpoint` the turn's first checkpoint saved. No look for an erase: the caller read the
   * session in that same transaction, so none can have come between (the session lease's
   * write, store/session-lease.ts `acquire`). `hasRow`: that reading found the session's row
   * (a message or a checkpoint of it), so no insert is tried: even one that does nothing cost a
   * session's next turn 0.14 ms of its way to the request, cold (docs/performance.md, "The
   * session's row not made twice").
   */
  openTurn(
    key: { userId: string; sessionId: string },
    agent: string,
    firstInput: string,
    at: Date,
    keepStaged?: readonly number[],
    checkpoint?: string | CheckpointWrite,
    hasRow = false,
  ): void {
    if (!hasRow) this.ensureSession(key.userId, key.sessionId, agent, firstInput, at);
    if (keepStaged) this.attachments.dropStaged(key.userId, key.sessionId, keepStaged);
    if (checkpoint !== undefined) putCheckpoint(this.db, key.userId, key.sessionId, checkpoint, at);
  }

  checkpoint(userId: string, sessionId: string): string | undefined {
    const row = this.db
      .query("SELECT body FROM checkpoints WHERE user_id = ? AND session_id = ?")
      .get(userId, sessionId) as { body: string } | null;
    return row?.body;
  }

  /** The input a checkpoint's body keeps apart (store/checkpoint.ts `withInput`). */
  checkpointInput(userId: string, sessionId: string): string | undefined {
    return checkpointInput(this.db, userId, sessionId);
  }

  /** With `keepStaged`, the staged images not named there are dropped in the same write (a turn's first checkpoint). */
  saveCheckpoint(
    userId: string,
    sessionId: string,
    body: string | CheckpointWrite,
    at: Date,
    mark?: TurnMark,
    keepStaged?: readonly number[],
  ): void {
    this.db
      .transaction(() => {
        refuseStale(this.db, userId, sessionId, mark);
        if (keepStaged) this.attachments.dropStaged(userId, sessionId, keepStaged);
        putCheckpoint(this.db, userId, sessionId, body, at);
      })
      .immediate();
  }

  /**
   * Drops the checkpoint (and the images it staged); a session left with no message, no
   * checkpoint and no attached document goes too (a document keeps it, so `sessions.delete` can
   * still erase it).
   */
  clearCheckpoint(userId: string, sessionId: string, mark?: TurnMark): void {
    this.db.transaction(() => {
      refuseStale(this.db, userId, sessionId, mark);
      this.db.query("DELETE FROM checkpoints WHERE user_id = ? AND session_id = ?").run(userId, sessionId);
      this.attachments.dropStaged(userId, sessionId, []);
      this.db
        .query(
          `DELETE FROM sessions WHERE user_id = ? AND session_id = ? AND message_count = 0
           AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.user_id = sessions.user_id AND d.session_id = sessions.session_id)`,
        )
        .run(userId, sessionId);
    })();
  }

  /** Appends (or, for an edit, replaces the tail with) one turn; returns its first seq. */
  commitTurn(turn: CommitTurn): number {
    const { db } = this;
    const { userId: u, sessionId: s } = turn;
    const { first, was, now } = db
      .transaction(() => {
        const was = this.histories.stamp(u, s);
        const at = turn.at.getTime();
        const opening = turn.messages.find((m) => m.role === "user");
        this.ensureSession(u, s, turn.agent, opening?.content ?? "", turn.at, turn.since);
        refuseIfTakenOver(db, u, s, turn.owner);
        if (turn.replaceFromSeq !== undefined) this.dropFrom(u, s, turn.replaceFromSeq, at);
        else if (turn.setAside) recordErasure(db, u, s, at, "set_aside");
        const last = db
          .query("SELECT COALESCE(MAX(seq), -1) AS seq FROM messages WHERE user_id = ? AND session_id = ?")
          .get(u, s) as { seq: number };
        const insert = db.query(
          `INSERT INTO messages (user_id, session_id, seq, role, content, reasoning, tool_calls, tool_call_id, usage, by_core, created_at, sources)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        );
        let seq = last.seq;
        for (const m of turn.messages)
          insert.run(
            u,
            s,
            ++seq,
            ...messageColumns(m),
            at,
            // Without names: erasing a cited session or document leaves no copy of its title here.
            storedSources(db, u, m.sources, turn.since),
          );
        const firstSeq = last.seq + 1;
        const images = opening?.role === "user" ? (opening.attachments ?? []) : [];
        if (images.length > 0 || turn.replaceFromSeq !== undefined)
          this.attachments.settle(u, s, firstSeq, images, turn.imageTokens ?? new Map(), turn.replaceFromSeq);
        this.touch(u, s, turn, at);
        db.query("DELETE FROM checkpoints WHERE user_id = ? AND session_id = ?").run(u, s);
        if (turn.memoryText !== undefined) {
          db.query(
            `INSERT INTO memory (id, user_id, session_id, seq, source, text, at) VALUES (${NEW_MEMORY_ID}, ?, ?, ?, ?, ?, ?)`,
          ).run(u, s, firstSeq, `session:${s}`, turn.memoryText, at);
        }
        return { first: firstSeq, was, now: this.histories.stamp(u, s) };
      })
      .immediate();
    const messages = turn.messages.map((m) =>
      modelMessage(rowOf(m), m.role === "user" ? m.attachments : undefined),
    );
    this.histories.remember(u, s, { was, now }, { ...turn, messages });
    return first;
  }

  /** Renames a session (the title then stays); false when there is no such session. */
  rename(userId: string, sessionId: string, title: string): boolean {
    const r = this.db
      .query("UPDATE sessions SET title = ?, renamed = 1 WHERE user_id = ? AND session_id = ?")
      .run(title, userId, sessionId);
    return r.changes > 0;
  }

  /** An edit's tail erased, recorded (`editedSince`); a long one has FTS5 forget it by a merge of the index (store/db/fts-forget.ts). */
  private dropFrom(userId: string, sessionId: string, seq: number, at: number): void {
    recordErasure(this.db, userId, sessionId, at, true);
    // Other answers citing the turns erased: the new turns take their seqs.
    dropCitations(this.db, userId, sessionId, -1, seq);
    const tail = "WHERE user_id = ? AND session_id = ? AND seq >= ?";
    forgettingRows(this.db, indexedRows(this.db, tail, userId, sessionId, seq), () => {
      // The replaced turns' 0.1 entries first: they are told by the messages' words.
      dropImportedMemory(this.db, userId, sessionId, seq);
      this.db.query(`DELETE FROM messages ${tail}`).run(userId, sessionId, seq);
      this.db.query(`DELETE FROM memory ${tail}`).run(userId, sessionId, seq);
    });
  }

  /** The session's counters, preview and agent after a turn. */
  private touch(userId: string, sessionId: string, turn: CommitTurn, at: number): void {
    const edit = turn.replaceFromSeq !== undefined;
    const preview =
      previewText(turn.messages) ?? (edit ? latestShownText(this.db, userId, sessionId) : undefined);
    // A turn appended adds its own (not the core's requests to write again): counted anew, the
    // session's every row was read (`by_core` sits past the text), 60-95 ms of the main loop a
    // turn at 100,000 messages. An edit, which runs off the loop, counts what its erase left.
    const added = turn.messages.filter((m) => !(m.role === "user" && m.by_core)).length;
    const count = edit
      ? "(SELECT COUNT(*) FROM messages WHERE user_id = $u AND session_id = $s AND by_core = 0)"
      : "message_count + $added";
    this.db
      .query(
        `UPDATE sessions SET agent = $agent, updated_at = ${LATER}, message_count = ${count},
           preview = COALESCE($preview, preview),
           title = CASE WHEN renamed = 0 AND $title IS NOT NULL THEN $title ELSE title END
         WHERE user_id = $u AND session_id = $s`,
      )
      .run({
        agent: turn.agent,
        at,
        u: userId,
        s: sessionId,
        preview: preview === undefined ? null : previewOf(preview),
        title: this.retitle(turn),
        added,
      });
  }

  /** A new title only when the turn replaced the session's first user message. */
  private retitle(turn: CommitTurn): string | null {
    if (turn.replaceFromSeq === undefined) return null;
    const firstUser = this.db
      .query(
        "SELECT content FROM messages WHERE user_id = ? AND session_id = ? AND role = 'user' AND by_core = 0 ORDER BY seq LIMIT 1",
      )
      .get(turn.userId, turn.sessionId) as { content: string | null } | null;
    return titleOf(firstUser?.content ?? "");
  }
}

/** A message as a row would hold it (for the cache; seq and time do not matter there). */
function rowOf(m: TurnMessage): MessageRow {
  const [role, content, reasoning, toolCalls, toolCallId, usage, byCore] = messageColumns(m);
  return {
    seq: 0,
    role: role as ChatMessage["role"],
    content,
    reasoning,
    tool_calls: toolCalls,
    tool_call_id: toolCallId,
    usage,
    by_core: byCore,
    created_at: 0,
  };
}

function messageColumns(
  m: TurnMessage,
): [string, string | null, string | null, string | null, string | null, string | null, number] {
  const calls = m.role === "assistant" && m.tool_calls?.length ? JSON.stringify(m.tool_calls) : null;
  return [
    m.role,
    m.content,
    m.reasoning ?? null,
    calls,
    m.role === "tool" ? m.tool_call_id : null,
    m.usage ? JSON.stringify(m.usage) : null,
    // The core's request to write again: sessions.* leave it out (agent/write-again.ts).
    m.role === "user" && m.by_core ? 1 : 0,
  ];
}
