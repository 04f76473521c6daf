import { MAX_IMAGE_BYTES } from "../images/limits.ts";
import { CoreError } from "../protocol/errors.ts";
import { LongText } from "../util/long-text.ts";
import { nextTurn } from "../util/next-turn.ts";
import { type AttachmentData, PART_BYTES } from "./attachments.ts";
import type { Store } from "./store.ts";

/**
 * One of the user's images with its bytes, when the store has it whole (one still being staged a
 * part at a time, or erased in steps, parts first, is not: never given with zeros for the parts
 * missing). A part a turn of the event loop: read in one go, a 20 MB image held the loop ~40 ms,
 * and a turn resending three from its history over 100 ms, ping unanswered meanwhile.
 */
export async function readAttachment(
  store: Store,
  userId: string,
  id: number,
): Promise<AttachmentData | undefined> {
  const attachments = store.conversations.attachments;
  // Checked outside the guard: a row's bad size is not SQLite's damage (nothing marked).
  const head = checkedSize(store.guard(() => attachments.head(userId, id)));
  if (!head) return undefined;
  const data = new Uint8Array(head.bytes);
  for (let at = 0, part = 0; at < head.bytes; part++) {
    if (part > 0) await nextTurn();
    const piece = store.guard(() => attachments.part(userId, id, part));
    if (!piece?.byteLength) return undefined;
    data.set(piece.subarray(0, head.bytes - at), at);
    at += piece.byteLength;
  }
  return { ...head, data };
}

/**
 * A stored image whose row says a size no image has (a damaged file, a hand edit): that image's
 * damage, answered as an image that cannot be decoded is (docs/protocol.md#images). Never the
 * database's: marking it set every conversation aside at the next start for one row.
 */
export class DamagedAttachment extends Error {
  constructor(
    readonly id: number,
    readonly why: string,
  ) {
    super(`attachment ${id} is damaged in the store: ${why}`);
  }
}

/**
 * A row's size as the core wrote it: a whole count up to what an image may be (images/limits.ts),
 * checked before a buffer of that size is made: 1 TiB failed as "Out of memory", -1 as a
 * RangeError, both internal errors unnamed; 21 MiB allocated 21 MB for nothing.
 */
function checkedSize<T extends { id: number; bytes: number }>(head: T | undefined): T | undefined {
  if (!head) return undefined;
  const { id, bytes } = head;
  if (Number.isSafeInteger(bytes) && bytes >= 0 && bytes <= MAX_IMAGE_BYTES) return head;
  throw new DamagedAttachment(
    id,
    `its size (${String(bytes).slice(0, 40)}) is no image's, 0 to ${MAX_IMAGE_BYTES} bytes`,
  );
}

/**
 * `sessions.attachment`: one of the user's images, its bytes as base64; an id the user has not is
 * refused, one whose row is damaged too (`problem: "damaged"`). The base64 stays in pieces, written one at a time (util/long-text.ts).
 */
export async function attachmentOf(
  store: Store,
  userId: string,
  id: number,
): Promise<{ id: number; mime: string; bytes: number; data: LongText }> {
  const found = await readAttachment(store, userId, id).catch((err: unknown) => {
    if (!(err instanceof DamagedAttachment)) throw err;
    throw new CoreError("invalid_request", `params.id: ${err.message}`, { field: "id", problem: "damaged" });
  });
  if (!found)
    throw new CoreError("invalid_request", `params.id: no attachment ${id} for this user`, {
      field: "id",
      reason: "attachment_not_found",
    });
  // Encoded a part at a time too (PART_BYTES is a multiple of 3: the pieces join as one base64).
  const data = new LongText();
  for (let at = 0; at < found.bytes; at += PART_BYTES) {
    if (at > 0) await nextTurn();
    const piece = Buffer.from(
      found.data.buffer,
      found.data.byteOffset + at,
      Math.min(PART_BYTES, found.bytes - at),
    );
    data.add(piece.toString("base64"));
  }
  return { id: found.id, mime: found.mime, bytes: found.bytes, data };
}
