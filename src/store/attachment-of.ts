import { CoreError } from "../protocol/errors.ts";
import type { Store } from "./store.ts";

/** `sessions.attachment`: one of the user's images, its bytes as base64; an id the user has not is refused. */
export function attachmentOf(
  store: Store,
  userId: string,
  id: number,
): { id: number; mime: string; bytes: number; data: string } {
  const found = store.guard(() => store.conversations.attachments.get(userId, id));
  if (!found)
    throw new CoreError("invalid_request", `params.id: no attachment ${id} for this user`, {
      field: "id",
      reason: "attachment_not_found",
    });
  return {
    id: found.id,
    mime: found.mime,
    bytes: found.bytes,
    data: Buffer.from(found.data).toString("base64"),
  };
}
