import type { Database } from "bun:sqlite";
import type { AttachmentRef } from "../protocol/chat-message.ts";
import { oweRewrite } from "./erase.ts";
import { refuseStale, type TurnMark } from "./turn-mark.ts";

/** An image's bytes are kept in parts of this size (a multiple of 3, so parts encode to base64 apart). */
export const PART_BYTES = 3 * 341 * 1024;

/** An image to keep: its type (from its bytes) and the bytes. */
export interface NewAttachment {
  mime: string;
  data: Uint8Array;
}

/** An attachment with its bytes, as `sessions.attachment` returns it before encoding. */
export interface AttachmentData extends AttachmentRef {
  data: Uint8Array;
  /** What llama-server counted for it when it was sent; null before that. */
  tokens: number | null;
}

interface RefRow {
  id: number;
  seq: number | null;
  mime: string;
  bytes: number;
  tokens: number | null;
}

/**
 * A user message's images in the database (docs/protocol.md#images): staged when its turn
 * begins (`seq` NULL, the checkpoint names the ids once all are in), given the message's seq
 * when the turn commits, dropped with the messages an edit replaces, and erased with their session or user
 * (foreign key, and `store/erase.ts` by user). Every read names the user: an id of another
 * user's image finds nothing.
 */
export class Attachments {
  constructor(private readonly db: Database) {}

  /**
   * Keeps a turn's new images, not yet tied to a message; their refs in order. One part (about
   * 1 MB) a transaction, through `write` (Store.write waits out another core's lock), with a turn
   * of the event loop between: 8 images of 20 MB in one transaction held the loop 1.8 s
   * (docs/protocol.md#images). All or nothing: on a failure (an erase of the session, a full
   * disk) what it staged is erased before the error goes on. Run under the session's lease, so no
   * other turn drops the rows before a checkpoint names them; a death in between leaves rows no
   * checkpoint names, which the session's next turn drops (`dropStaged`).
   */
  async stage(
    userId: string,
    sessionId: string,
    images: readonly NewAttachment[],
    at: Date,
    mark?: TurnMark,
    write: <T>(work: () => T, signal?: AbortSignal) => Promise<T> = async (work) => work(),
    signal?: AbortSignal,
  ): Promise<AttachmentRef[]> {
    const refs: AttachmentRef[] = [];
    try {
      for (const image of images) {
        const ref = { id: 0, mime: image.mime, bytes: image.data.byteLength };
        for (let from = 0, part = 0; from < ref.bytes || part === 0; from += PART_BYTES, part++) {
          if (refs.length > 0 || part > 0) await new Promise((r) => setImmediate(r));
          // A cancel stops it between parts, what was staged erased below.
          signal?.throwIfAborted();
          const piece = image.data.subarray(from, from + PART_BYTES);
          // Its wait for this core's erases ends with a cancel too (minutes behind a large delete).
          await write(() => this.stagePart(userId, sessionId, ref, part, piece, at, mark), signal);
          if (part === 0) refs.push(ref);
        }
      }
      return refs;
    } catch (err) {
      // None staged (a cancel while the first part waited): nothing to erase, nor to wait for.
      if (refs.length === 0) throw err;
      const ids = JSON.stringify(refs.map((r) => r.id));
      await write(() => {
        const { changes } = this.db
          .query("DELETE FROM attachments WHERE user_id = ? AND id IN (SELECT value FROM json_each(?))")
          .run(userId, ids);
        if (changes > 0) oweRewrite(this.db);
      }).catch(() => undefined);
      throw err;
    }
  }

  /** `work` in one transaction: a first part's (`stagePart`, its own then a savepoint) with what it needs written. */
  inTransaction<T>(work: () => T): T {
    return this.db.transaction(work).immediate();
  }

  /** One part of an image in its own transaction; the first makes the image's row (its id into `ref`). */
  private stagePart(
    userId: string,
    sessionId: string,
    ref: AttachmentRef,
    part: number,
    data: Uint8Array,
    at: Date,
    mark: TurnMark | undefined,
  ): void {
    this.db
      .transaction(() => {
        refuseStale(this.db, userId, sessionId, mark);
        if (part === 0) {
          const row = this.db
            .query(
              `INSERT INTO attachments (user_id, session_id, seq, mime, bytes, created_at)
               VALUES (?, ?, NULL, ?, ?, ?) RETURNING id`,
            )
            .get(userId, sessionId, ref.mime, ref.bytes, at.getTime()) as { id: number };
          ref.id = row.id;
        }
        this.db
          .query("INSERT INTO attachment_data (id, part, user_id, data) VALUES (?, ?, ?, ?)")
          .run(ref.id, part, userId, data);
      })
      .immediate();
  }

  /**
   * Staged images of the session that no turn names any more (a checkpoint set aside, a refused
   * turn), erased: their pages' rewrite owed as for an edit's (`settle`). Until it is done (the
   * store's `settleOwed`), the log still holds the bytes written while they were staged.
   */
  dropStaged(userId: string, sessionId: string, keep: readonly number[]): void {
    const { changes } = this.db
      .query(
        `DELETE FROM attachments WHERE user_id = ? AND session_id = ? AND seq IS NULL
         AND id NOT IN (SELECT value FROM json_each(?))`,
      )
      .run(userId, sessionId, JSON.stringify(keep));
    if (changes > 0) oweRewrite(this.db);
  }

  /**
   * In a turn's commit: the images of the messages from `fromSeq` on that the turn does not
   * carry over are dropped (an edit, a regenerate), then the turn's user message `seq` gets its
   * own, with the tokens each was counted at where known.
   */
  settle(
    userId: string,
    sessionId: string,
    seq: number,
    refs: readonly AttachmentRef[],
    tokens: ReadonlyMap<number, number>,
    fromSeq?: number,
  ): void {
    const ids = JSON.stringify(refs.map((r) => r.id));
    if (fromSeq !== undefined) {
      const dropped = this.db
        .query(
          `DELETE FROM attachments WHERE user_id = ? AND session_id = ? AND seq >= ?
           AND id NOT IN (SELECT value FROM json_each(?))`,
        )
        .run(userId, sessionId, fromSeq, ids).changes;
      // An image an edit takes away (a photo attached by mistake) is erased as a delete's are: the
      // pages rewritten after the commit (store/erase-work.ts), so none of its bytes stays.
      if (dropped > 0) oweRewrite(this.db);
    }
    const set = this.db.query(
      "UPDATE attachments SET seq = ?, tokens = COALESCE(?, tokens) WHERE user_id = ? AND session_id = ? AND id = ?",
    );
    for (const r of refs) set.run(seq, tokens.get(r.id) ?? null, userId, sessionId, r.id);
  }

  /** The refs of a session's messages by seq (staged ones left out), each list in id order. */
  refsBySeq(
    userId: string,
    sessionId: string,
    fromSeq = 0,
    beforeSeq = Number.MAX_SAFE_INTEGER,
  ): Map<number, AttachmentRef[]> {
    const rows = this.db
      .query(
        `SELECT id, seq, mime, bytes, tokens FROM attachments
         WHERE user_id = ? AND session_id = ? AND seq >= ? AND seq < ? ORDER BY seq, id`,
      )
      .all(userId, sessionId, fromSeq, beforeSeq) as RefRow[];
    const out = new Map<number, AttachmentRef[]>();
    for (const r of rows) {
      const list = out.get(r.seq as number) ?? [];
      list.push({ id: r.id, mime: r.mime, bytes: r.bytes });
      out.set(r.seq as number, list);
    }
    return out;
  }

  /** What llama-server counted for each of these images, where known. */
  tokens(userId: string, ids: readonly number[]): Map<number, number> {
    const rows = this.db
      .query(
        `SELECT id, tokens FROM attachments WHERE user_id = ? AND tokens IS NOT NULL
         AND id IN (SELECT value FROM json_each(?))`,
      )
      .all(userId, JSON.stringify(ids)) as { id: number; tokens: number }[];
    return new Map(rows.map((r) => [r.id, r.tokens]));
  }

  /** An image's row, its bytes not read (`readAttachment` reads them a part at a time). */
  head(userId: string, id: number): Omit<AttachmentData, "data"> | undefined {
    const row = this.db
      .query("SELECT id, mime, bytes, tokens FROM attachments WHERE user_id = ? AND id = ?")
      .get(userId, id) as RefRow | null;
    return row ? { id: row.id, mime: row.mime, bytes: row.bytes, tokens: row.tokens } : undefined;
  }

  /** One part of an image's bytes, or undefined where it is not (yet, or any more) in the store. */
  part(userId: string, id: number, part: number): Uint8Array | undefined {
    const row = this.db
      .query("SELECT data FROM attachment_data WHERE id = ? AND user_id = ? AND part = ?")
      .get(id, userId, part) as { data: Uint8Array } | null;
    return row?.data;
  }
}
