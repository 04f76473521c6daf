import type { Database } from "bun:sqlite";
import type { ChatMessage } from "../protocol/chat-message.ts";
import type { Attachments } from "./attachments.ts";
import { type MessageRow, modelMessage } from "./message-rows.ts";

/** Sessions whose history is kept in memory (a few active chats). */
const CACHED_HISTORIES = 16;

/**
 * Rows `load` reads in one turn of the event loop: 2,000 chat-sized messages take ~1.5 ms
 * (bench/history-read.ts: the loop's longest hold 5 ms for 100,000, read whole 84 ms), so
 * `ping` and `cancel` wait no longer than that.
 */
export const HISTORY_PAGE = 2000;

/** What tells a session's history changed: its `updated_at` and the newest erase's number. */
type Stamp = string;

interface Cached {
  stamp: Stamp;
  messages: ChatMessage[];
}

/**
 * Recent sessions' histories as the model sees them (a seq is its index: seqs run from 0
 * without gaps), each valid while its session's stamp is unchanged: every write of a session's
 * messages or their images is a turn's commit (which moves `updated_at` past the user's latest,
 * store/conversations.ts LATER) or an erase (which takes a number, store/erasures.ts). Checked
 * by the session, not by `PRAGMA data_version`: that moves with any other connection's write,
 * and the store's thread writes a chunk of an indexing document every few hundred ms, so a
 * long session was read whole (~0.5 s for 100k messages, the loop held) again and again.
 */
export class SessionHistories {
  private readonly cache = new Map<string, Cached>();

  constructor(
    private readonly db: Database,
    private readonly attachments: Attachments,
  ) {}

  /** The model's history of a session, oldest first: the cached one, or read whole now. */
  read(userId: string, sessionId: string): ChatMessage[] {
    const key = keyOf(userId, sessionId);
    const stamp = this.current(userId, sessionId);
    const cached = this.cache.get(key);
    if (cached && cached.stamp === stamp) return cached.messages.slice();
    const { messages } = this.page(userId, sessionId, 0, Number.MAX_SAFE_INTEGER);
    this.keep(key, { stamp, messages });
    return messages.slice();
  }

  /**
   * The history read into the cache a page a turn of the loop (HISTORY_PAGE), so the turn's
   * read in the lease's write (agent/turn/session.ts) finds it there. A page read after a write
   * of the session's is caught by the stamp taken before the first: the cache then misses.
   */
  async load(userId: string, sessionId: string, signal?: AbortSignal): Promise<void> {
    const key = keyOf(userId, sessionId);
    const stamp = this.current(userId, sessionId);
    if (this.cache.get(key)?.stamp === stamp) return;
    const messages: ChatMessage[] = [];
    let waited = false;
    for (let from = 0; ; ) {
      const page = this.page(userId, sessionId, from, HISTORY_PAGE);
      for (const m of page.messages) messages.push(m);
      if (page.messages.length < HISTORY_PAGE) break;
      from = page.next;
      await new Promise((r) => setImmediate(r));
      waited = true;
      signal?.throwIfAborted();
    }
    // Written meanwhile (a turn of another core, an erase): not kept, the lease's write reads it.
    // Read in one page, kept under the stamp taken before it: any write after that stamp moves
    // it (`updated_at` rises, erase numbers rise), so the entry is never served for it; asking
    // again was one more query on every named chat's way (docs/performance.md).
    if (!waited || this.stamp(userId, sessionId) === stamp) this.keep(key, { stamp, messages });
  }

  /** The session's stamp now (in a turn's commit: before and after its writes). */
  stamp(userId: string, sessionId: string): Stamp {
    const row = this.db
      .query(
        `SELECT (SELECT updated_at FROM sessions WHERE user_id = ? AND session_id = ?) AS at,
           (SELECT seq FROM sqlite_sequence WHERE name = 'erasures') AS mark`,
      )
      .get(userId, sessionId) as { at: number | null; mark: number | null };
    return `${row.at ?? "none"}:${row.mark ?? 0}`;
  }

  /**
   * The session's stamp, as a turn's read takes it: histories cached before a newer erase can
   * never match again, and one of them may be a session another core erased (or a tail its edit
   * did), which this core is told of no other way. Dropped then, not left to age out.
   */
  private current(userId: string, sessionId: string): Stamp {
    const stamp = this.stamp(userId, sessionId);
    const mark = markOf(stamp);
    for (const [key, cached] of this.cache) if (markOf(cached.stamp) !== mark) this.cache.delete(key);
    return stamp;
  }

  /**
   * A committed turn's messages appended to the cached history (an edit's tail cut first),
   * where the cache held the session as it was right before the commit (`was`); else dropped.
   */
  remember(
    userId: string,
    sessionId: string,
    stamps: { was: Stamp; now: Stamp },
    turn: { replaceFromSeq?: number; messages: readonly ChatMessage[] },
  ): void {
    const key = keyOf(userId, sessionId);
    const cached = this.cache.get(key);
    if (!cached) return;
    if (cached.stamp !== stamps.was) {
      this.cache.delete(key);
      return;
    }
    if (turn.replaceFromSeq !== undefined)
      cached.messages.length = Math.min(cached.messages.length, turn.replaceFromSeq);
    for (const m of turn.messages) cached.messages.push(m);
    cached.stamp = stamps.now;
  }

  /** Forgets a session's cached history, or all of a user's (they were deleted). */
  forget(userId: string, sessionId?: string): void {
    for (const key of [...this.cache.keys()]) {
      if (sessionId === undefined ? key.startsWith(`${userId}\0`) : key === keyOf(userId, sessionId))
        this.cache.delete(key);
    }
  }

  private keep(key: string, entry: Cached): void {
    this.cache.delete(key);
    if (this.cache.size >= CACHED_HISTORIES) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(key, entry);
  }

  /** Up to `limit` messages from seq `from` on, with their images; `next`: the seq after the last. */
  private page(userId: string, sessionId: string, from: number, limit: number) {
    const rows = this.db
      .query(
        `SELECT seq, role, content, reasoning, tool_calls, tool_call_id, usage, created_at, by_core FROM messages
         WHERE user_id = ? AND session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`,
      )
      .all(userId, sessionId, from, limit) as MessageRow[];
    const next = (rows[rows.length - 1]?.seq ?? from - 1) + 1;
    const images = this.attachments.refsBySeq(userId, sessionId, from, next);
    return { messages: rows.map((r) => modelMessage(r, images.get(r.seq))), next };
  }
}

/** The newest erase's number a stamp was taken at. */
const markOf = (stamp: Stamp) => stamp.slice(stamp.lastIndexOf(":") + 1);

function keyOf(userId: string, sessionId: string): string {
  return `${userId}\0${sessionId}`;
}
