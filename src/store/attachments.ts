import type { Database } from "bun:sqlite";
import type { AttachmentRef } from "../protocol/chat-message.ts";
import { refuseIfErased } from "./erasures.ts";

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
 * begins (`seq` NULL, the checkpoint names the ids), given the message's seq when the turn
 * commits, dropped with the messages an edit replaces, and erased with their session or user
 * (foreign key, and `store/erase.ts` by user). Every read names the user: an id of another
 * user's image finds nothing.
 */
export class Attachments {
  constructor(private readonly db: Database) {}

  /** Keeps a turn's new images, not yet tied to a message; their refs in order. */
  stage(
    userId: string,
    sessionId: string,
    images: readonly NewAttachment[],
    at: Date,
    since?: number,
  ): AttachmentRef[] {
    return this.db
      .transaction(() => {
        refuseIfErased(this.db, userId, sessionId, since);
        const insert = this.db.query(
          `INSERT INTO attachments (user_id, session_id, seq, mime, bytes, created_at)
           VALUES (?, ?, NULL, ?, ?, ?) RETURNING id`,
        );
        const keep = this.db.query(
          "INSERT INTO attachment_data (id, part, user_id, data) VALUES (?, ?, ?, ?)",
        );
        return images.map((image) => {
          const bytes = image.data.byteLength;
          const { id } = insert.get(userId, sessionId, image.mime, bytes, at.getTime()) as { id: number };
          for (let at = 0, part = 0; at < bytes || part === 0; at += PART_BYTES, part++)
            keep.run(id, part, userId, image.data.subarray(at, at + PART_BYTES));
          return { id, mime: image.mime, bytes };
        });
      })
      .immediate();
  }

  /** Staged images of the session that no turn names any more (a checkpoint set aside), erased. */
  dropStaged(userId: string, sessionId: string, keep: readonly number[]): void {
    this.db
      .query(
        `DELETE FROM attachments WHERE user_id = ? AND session_id = ? AND seq IS NULL
         AND id NOT IN (SELECT value FROM json_each(?))`,
      )
      .run(userId, sessionId, JSON.stringify(keep));
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
    if (fromSeq !== undefined)
      this.db
        .query(
          `DELETE FROM attachments WHERE user_id = ? AND session_id = ? AND seq >= ?
           AND id NOT IN (SELECT value FROM json_each(?))`,
        )
        .run(userId, sessionId, fromSeq, ids);
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

  /** One image with its bytes, when the user has it. */
  get(userId: string, id: number): AttachmentData | undefined {
    const row = this.db
      .query("SELECT id, mime, bytes, tokens FROM attachments WHERE user_id = ? AND id = ?")
      .get(userId, id) as RefRow | null;
    if (!row) return undefined;
    const data = new Uint8Array(row.bytes);
    const parts = this.db
      .query("SELECT data FROM attachment_data WHERE id = ? AND user_id = ? ORDER BY part")
      .iterate(id, userId) as Iterable<{ data: Uint8Array }>;
    let at = 0;
    for (const p of parts) {
      data.set(p.data.subarray(0, data.length - at), at);
      at += p.data.byteLength;
    }
    return { id: row.id, mime: row.mime, bytes: row.bytes, tokens: row.tokens, data };
  }
}
